package layout

import (
	"go/ast"
	"testing"
)

// rawReadsAllowed lists every os.ReadFile, os.Open and os.OpenFile outside the one reader
// of small files (pipeline/smallfile) with why it is not a small file a user names. A new
// raw read of a user's input fails TestSmallInputsGoThroughOneReader: read it with
// smallfile.Read and a cap, or open it with smallfile.Open when it is streamed
// (docs/inputs.md), or add it here with its reason.
var rawReadsAllowed = map[rawCall]string{
	{"pipeline/blobstore/prune.go", "removeUnheld", "os.Open"}:                              "the cache's blob store (own state)",
	{"pipeline/blobstore/store.go", "Store.Read", "os.ReadFile"}:                            "the cache's blob store (own state)",
	{"pipeline/blobstore/writer.go", "Store.lockPartial", "os.OpenFile"}:                    "the cache's blob store (own state)",
	{"pipeline/cache.go", "Cache.Lookup", "os.ReadFile"}:                                    "the cache's entries and locks (own state)",
	{"pipeline/cache.go", "Cache.lastInputs", "os.ReadFile"}:                                "the cache's entries and locks (own state)",
	{"pipeline/cache.go", "Cache.lock", "os.OpenFile"}:                                      "the cache's entries and locks (own state)",
	{"pipeline/cache.go", "artifacts", "os.Open"}:                                           "the cache's entries and locks (own state)",
	{"pipeline/depot/depot.go", "lockOutput", "os.OpenFile"}:                                "the depot's lock file, created by the depot",
	{"pipeline/depot/depot.go", "runner.attempt", "os.OpenFile"}:                            "a build log the depot writes",
	{"pipeline/depot/depot.go", "running", "os.Open"}:                                       "the depot's lock file, opened to test the lock (flock, no read)",
	{"pipeline/digestmemo.go", "Cache.memoDigest", "os.ReadFile"}:                           "the cache's digest memo (own state)",
	{"pipeline/engine.go", "openWorkspace", "os.OpenFile"}:                                  "a stage's log in the build directory, written",
	{"pipeline/handoff.go", "Env.ReadOutput", "os.ReadFile"}:                                "a stage's output record in the build directory (own state)",
	{"pipeline/lease.go", "Cache.flockShared", "os.OpenFile"}:                               "a cache lock file (own state)",
	{"pipeline/list.go", "held", "os.Open"}:                                                 "a cache lock file (own state)",
	{"pipeline/output/mount_linux.go", "CheckNotMounted", "os.Open"}:                        "output rules (pipeline/output), not an input",
	{"pipeline/output/mount_linux.go", "addWithPartitions", "os.ReadFile"}:                  "output rules (pipeline/output), not an input",
	{"pipeline/output/mount_linux.go", "deviceNumbers", "os.ReadFile"}:                      "output rules (pipeline/output), not an input",
	{"pipeline/output/output.go", "Place", "os.Open"}:                                       "output rules (pipeline/output), not an input",
	{"pipeline/output/output.go", "Write", "os.OpenFile"}:                                   "output rules (pipeline/output), not an input",
	{"pipeline/output/output.go", "removeStalePartials", "os.OpenFile"}:                     "output rules (pipeline/output), not an input",
	{"pipeline/output/output.go", "syncDir", "os.Open"}:                                     "output rules (pipeline/output): the output's directory, synced",
	{"pipeline/output/output.go", "syncFile", "os.Open"}:                                    "output rules (pipeline/output): the finished output, synced",
	{"pipeline/ownedtemp.go", "reapIfOrphaned", "os.Open"}:                                  "an owner lock in the build's temporary directory (own state)",
	{"pipeline/prune.go", "tryLock", "os.OpenFile"}:                                         "a cache lock file (own state)",
	{"pipeline/secrets.go", "hmacKey", "os.ReadFile"}:                                       "the cache's secret-digest key (own state)",
	{"pipeline/smallfile/smallfile.go", "open", "os.OpenFile"}:                              "the one reader itself (Read, and Open for streamed inputs)",
	{"seeds/artifact/diskpack/pack.go", "PackFiles", "os.Open"}:                             "the raw disk the build produced, packed as a stream",
	{"seeds/artifact/diskpack/pack.go", "PackFiles", "os.OpenFile"}:                         "the raw disk the build produced, packed as a stream",
	{"seeds/artifact/ociseed/artifact.go", "chunk.open", "os.Open"}:                         "a chunk of a seed directory that seed.Check accepted, streamed to push",
	{"seeds/artifact/ociseed/delta.go", "fillPack", "os.OpenFile"}:                          "the pack being pulled, written",
	{"seeds/artifact/ociseed/delta.go", "openOldRaw", "os.OpenFile"}:                        "--from raw disk: opened O_NONBLOCK, refused unless regular or a block device",
	{"seeds/artifact/ociseed/delta.go", "openPack", "os.OpenFile"}:                          "a seed directory's pack, opened O_NOFOLLOW and checked regular of the size seed.json says",
	{"seeds/artifact/ociseed/delta.go", "pushDelta", "os.ReadFile"}:                         "the chunk index of a seed directory that seed.Check accepted",
	{"seeds/artifact/ociseed/pull.go", "fetchFiles", "os.OpenFile"}:                         "a file of the pull's own staging directory (own state)",
	{"seeds/artifact/ociseed/pull.go", "pullChunk.fetch", "os.ReadFile"}:                    "a file of the pull's own staging directory (own state)",
	{"seeds/artifact/ociseed/push.go", "Push", "os.ReadFile"}:                               "seed.json of a seed directory that seed.Check accepted",
	{"seeds/artifact/ociseed/push.go", "hashChunks", "os.Open"}:                             "a chunk of a seed directory that seed.Check accepted, streamed",
	{"seeds/artifact/seed/data.go", "openStored", "os.OpenFile"}:                            "a seed directory's file, opened O_NOFOLLOW|O_NONBLOCK and checked regular",
	{"seeds/artifact/seed/device.go", "checkTarget", "os.OpenFile"}:                         "the block device a seed is written to or verified on (--device), a device on purpose",
	{"seeds/artifact/seed/device.go", "writeBlock", "os.OpenFile"}:                          "the block device a seed is written to or verified on (--device), a device on purpose",
	{"seeds/artifact/seed/device.go", "writeChunkedBlock", "os.OpenFile"}:                   "the block device a seed is written to or verified on (--device), a device on purpose",
	{"seeds/artifact/seed/raw.go", "DescribeChunked", "os.ReadFile"}:                        "the chunk index of a seed directory that seed.Check accepted",
	{"seeds/artifact/seed/raw.go", "FileDigest", "os.Open"}:                                 "a seed disk, streamed with its size from seed.json",
	{"seeds/artifact/seed/raw.go", "qcow2Raw", "os.Open"}:                                   "a seed disk, streamed with its size from seed.json",
	{"seeds/artifact/trust/keys.go", "writeNew", "os.OpenFile"}:                             "a key file being created (O_EXCL), written",
	{"seeds/contract/precachedisk/layout.go", "AddAgent", "os.Open"}:                        "the precache layout the build wrote",
	{"seeds/contract/precachedisk/layout.go", "AddAgent", "os.OpenFile"}:                    "the precache layout the build wrote",
	{"seeds/contract/precachedisk/layout.go", "ReadIndex", "os.ReadFile"}:                   "the precache layout the build wrote",
	{"seeds/contract/precachedisk/layout.go", "annotateIndex", "os.ReadFile"}:               "the precache layout the build wrote",
	{"seeds/contract/precachedisk/write.go", "writeEntry", "os.Open"}:                       "the precache layout the build wrote",
	{"seeds/contract/wire/seal.go", "ReadSealRequest", "os.Open"}:                           "on the node: the seal request the agent wrote into the guest",
	{"seeds/node/agent/facts.go", "authorizedKeys", "os.ReadFile"}:                          "on the node: the installed system's own files (passwd, presets, certificates, /proc) under the --root the factory mounted, none named by a user; the user-named --ignition-config and every hashed file go through smallfile",
	{"seeds/node/agent/facts.go", "colonFile", "os.ReadFile"}:                               "on the node: the installed system's own files (passwd, presets, certificates, /proc) under the --root the factory mounted, none named by a user; the user-named --ignition-config and every hashed file go through smallfile",
	{"seeds/node/agent/facts.go", "gatherBoot", "os.ReadFile"}:                              "on the node: the installed system's own files (passwd, presets, certificates, /proc) under the --root the factory mounted, none named by a user; the user-named --ignition-config and every hashed file go through smallfile",
	{"seeds/node/agent/facts.go", "gatherCerts", "os.ReadFile"}:                             "on the node: the installed system's own files (passwd, presets, certificates, /proc) under the --root the factory mounted, none named by a user; the user-named --ignition-config and every hashed file go through smallfile",
	{"seeds/node/agent/facts.go", "readMounts", "os.Open"}:                                  "on the node: the installed system's own files (passwd, presets, certificates, /proc) under the --root the factory mounted, none named by a user; the user-named --ignition-config and every hashed file go through smallfile",
	{"seeds/node/agent/facts.go", "readPresets", "os.ReadFile"}:                             "on the node: the installed system's own files (passwd, presets, certificates, /proc) under the --root the factory mounted, none named by a user; the user-named --ignition-config and every hashed file go through smallfile",
	{"seeds/node/agent/facts.go", "readString", "os.ReadFile"}:                              "on the node: the installed system's own files (passwd, presets, certificates, /proc) under the --root the factory mounted, none named by a user; the user-named --ignition-config and every hashed file go through smallfile",
	{"seeds/node/agent/facts_dns.go", "gatherDNS", "os.Open"}:                               "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/facts_inventory.go", "osRelease", "os.Open"}:                         "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/facts_inventory.go", "readDpkgStatus", "os.Open"}:                    "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/report.go", "Reporter.bootID", "os.ReadFile"}:                        "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/report.go", "Reporter.send", "os.OpenFile"}:                          "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/report.go", "Reporter.uptime", "os.ReadFile"}:                        "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/report.go", "ResolvePort", "os.ReadFile"}:                            "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/report.go", "nextSeq", "os.OpenFile"}:                                "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/seal.go", "shred", "os.OpenFile"}:                                    "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/seal_files.go", "mcOwned", "os.ReadFile"}:                            "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/seal_openshift.go", "Sealer.runSeedRecert", "os.ReadFile"}:           "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/seal_openshift.go", "Sealer.waitPullSecretRollout", "os.ReadFile"}:   "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/seal_plan.go", "Sealer.holdsPlaceholder", "os.ReadFile"}:             "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/sources.go", "DiskBySerial", "os.ReadFile"}:                          "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/unitrun.go", "UnitRunner.runUnit", "os.OpenFile"}:                    "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/units.go", "Unit.parse", "os.ReadFile"}:                              "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/agent/units.go", "readPreset", "os.Open"}:                                  "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/imageimport/imageimport.go", "ImportDisk", "os.Open"}:                      "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/imageimport/selinux.go", "readSELinuxConfig", "os.ReadFile"}:               "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/blkpg_linux.go", "BLKPGResize", "os.OpenFile"}:                 "on the node: its own disk, opened for the BLKPG ioctl, nothing read",
	{"seeds/node/reconfigure/files.go", "syncDir", "os.Open"}:                               "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/growext4.go", "run.ext4Bytes", "os.Open"}:                      "on the node: its container-storage partition, the ext4 superblock's fixed bytes",
	{"seeds/node/reconfigure/identity.go", "SeedIdentity", "os.ReadFile"}:                   "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/identity.go", "clusterFromKubeConfig", "os.ReadFile"}:          "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/identity.go", "kubeletNodeIP", "os.ReadFile"}:                  "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/medium.go", "hasSiteLabel", "os.Open"}:                         "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/openshift.go", "run.images", "os.ReadFile"}:                    "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/recert.go", "run.siteIDs", "os.ReadFile"}:                      "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/sealedrequest.go", "Options.FromSealedRequest", "os.ReadFile"}: "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/sitekeys.go", "machineSerial", "os.Open"}:                      "on the node: the seed's own files under the sysroot, not a file a user names",
	{"seeds/node/reconfigure/state.go", "loadProgress", "os.ReadFile"}:                      "on the node: the seed's own files under the sysroot, not a file a user names",
	{"stages/install/follow.go", "consoleTail", "os.ReadFile"}:                              "the install VM's console log and port file in the stage's scratch (own state)",
	{"stages/install/gather.go", "follower.gather", "os.ReadFile"}:                          "the install VM's console log and port file in the stage's scratch (own state)",
	{"stages/internal/vm/accel.go", "Prober.Probe", "os.OpenFile"}:                          "/dev/kvm, probed",
	{"stages/internal/vm/machine.go", "copyFile", "os.ReadFile"}:                            "a file the VM stage copies within its own scratch (own state)",
	{"stages/liveiso/coreiso/coreisotest/fixtures.go", "Fixture", "os.Open"}:                "test fixtures (a test helper package)",
	{"stages/liveiso/coreiso/coreisotest/fixtures.go", "SHA256", "os.ReadFile"}:             "test fixtures (a test helper package)",
	{"stages/liveiso/coreiso/rebuild.go", "clearLegacyHeaders", "os.OpenFile"}:              "the output ISO being rewritten",
	{"stages/liveiso/coreiso/rebuild.go", "rebuildInto", "os.OpenFile"}:                     "the copy it creates in its own work directory",
	{"stages/liveiso/coreiso/write.go", "openInPlace", "os.OpenFile"}:                       "the output ISO being written, or the input ISO copied to it as a stream",
	{"stages/liveiso/coreiso/write.go", "overwrite", "os.Open"}:                             "the output ISO being written, or the input ISO copied to it as a stream",
	{"stages/liveiso/stage.go", "runStage", "os.ReadFile"}:                                  "the rendered Ignition config from the render stage (own state)",
	{"stages/precache/layout.go", "copyFile", "os.Open"}:                                    "the precache layout the stage copies (own state)",
	{"stages/precache/layout.go", "copyFile", "os.OpenFile"}:                                "the precache layout the stage copies (own state)",
	{"stages/publish/provenance.go", "readRecord", "os.ReadFile"}:                           "the build's run record (own state)",
	{"stages/render/installer.go", "keepInstallerOutputs", "os.ReadFile"}:                   "openshift-install's outputs in the stage's work directory (own state)",
	{"stages/render/stage.go", "removePrevious", "os.ReadFile"}:                             "the previous render record in the output directory (own state)",
	{"stages/resolve/image.go", "client.extractFileWith", "os.OpenFile"}:                    "a file extracted from a release image, written",
	{"stages/seal/credentials.go", "writeCredentials", "os.ReadFile"}:                       "the render stage's credentials (own state)",
	{"stages/seal/disk.go", "compressZstd", "os.Open"}:                                      "the sealed disk, compressed as a stream (own state)",
	{"stages/seal/disk.go", "compressZstd", "os.OpenFile"}:                                  "the sealed disk, compressed as a stream (own state)",
	{"stages/seal/sbom.go", "readInventory", "os.Open"}:                                     "the inventory the node agent reported (own state)",
	{"stages/validate/stage.go", "readInputs", "os.ReadFile"}:                               "the render stage's Ignition config (own state)",
}

// TestSmallInputsGoThroughOneReader finds every raw read in cmd/, seeds/, stages/,
// pipeline/ and blueprints/ and checks it against rawReadsAllowed, both ways: a read not
// listed is a user's input that bypasses smallfile.Read, an entry with no read is stale.
func TestSmallInputsGoThroughOneReader(t *testing.T) {
	found := findRawCalls(t, nil, rawRead)
	checkAllowlist(t, found, rawReadsAllowed, "rawReadsAllowed",
		"read a file a user names with smallfile.Read and a cap (docs/inputs.md)", "reads raw")
}

// rawRead names a raw read: os.ReadFile, os.Open, os.OpenFile, ioutil.ReadFile.
func rawRead(pkg, name string, _ *ast.CallExpr) (string, bool) {
	switch call := pkg + "." + name; call {
	case "os.ReadFile", "os.Open", "os.OpenFile", "ioutil.ReadFile":
		return call, true
	}
	return "", false
}
