package layout

import (
	"go/ast"
	"strings"
	"testing"
)

// rawWritesAllowed lists every os.Create, os.CreateTemp, os.WriteFile and os.OpenFile
// with O_CREATE outside pipeline/output, with why what it writes is not an output a user
// names. A new raw write of a user-named output (-o, --device, an archive, a key file)
// fails TestOutputsGoThroughOneWriter: write it with output.Write (or check it with
// output.Check, CheckAll, CheckDir first), or add it here with its reason.
var rawWritesAllowed = map[rawCall]string{
	{"pipeline/blobstore/writer.go", "Store.lockPartial", "os.OpenFile O_CREATE"}: "own state: a file in the cache, the build or work directory, never a path a user names",
	{"pipeline/cache.go", "Cache.lock", "os.OpenFile O_CREATE"}:                   "own state: a file in the cache, the build or work directory, never a path a user names",
	{"pipeline/depot/depot.go", "lockOutput", "os.OpenFile O_CREATE"}:             "the depot's lock in --output-dir, which output.CheckDir checked",
	{"pipeline/depot/depot.go", "runner.attempt", "os.OpenFile O_CREATE"}:         "a build log in --output-dir, which output.CheckDir checked",
	{"pipeline/depot/depot.go", "writeAtomic", "os.CreateTemp"}:                   "depot.json and reports in --output-dir, which output.CheckDir checked",
	{"pipeline/engine.go", "openWorkspace", "os.OpenFile O_CREATE"}:               "own state: a file in the cache, the build or work directory, never a path a user names",
	{"pipeline/fsutil.go", "WriteFileAtomic", "os.CreateTemp"}:                    "the cache's and the build's own files and a rendered file in a stage's output directory; never a path a user names (`lock -o` goes through output.Write)",
	{"pipeline/handoff.go", "Env.WriteOutput", "os.WriteFile"}:                    "own state: a file in the cache, the build or work directory, never a path a user names",
	{"pipeline/lease.go", "Cache.flockShared", "os.OpenFile O_CREATE"}:            "own state: a file in the cache, the build or work directory, never a path a user names",
	{"pipeline/ownedtemp.go", "ownedDir", "os.CreateTemp"}:                        "own state: a file in the cache, the build or work directory, never a path a user names",
	{"pipeline/prune.go", "tryLock", "os.OpenFile O_CREATE"}:                      "own state: a file in the cache, the build or work directory, never a path a user names",
	{"seeds/artifact/diskpack/pack.go", "PackFiles", "os.OpenFile O_CREATE"}:      "the seal stage's pack in its output directory",
	{"seeds/artifact/diskpack/pack.go", "PackFiles", "os.WriteFile"}:              "the seal stage's pack index in its output directory",
	{"seeds/artifact/ociseed/delta.go", "fillPack", "os.OpenFile O_CREATE"}:       "the pack in the pull's own staging directory",
	{"seeds/artifact/ociseed/layout.go", "writeFileAtomic", "os.CreateTemp"}:      "index.json of an oci: layout (push checks the directory with output.CheckDir and CheckApart) or seed.json in a pull's staging directory",
	{"seeds/artifact/ociseed/layout.go", "writeVerified", "os.CreateTemp"}:        "a blob under an oci: layout's blobs/, named by its digest",
	{"seeds/artifact/ociseed/pull.go", "fetchFiles", "os.OpenFile O_CREATE"}:      "a file of the pull's own staging directory",
	{"seeds/artifact/ociseed/pull.go", "pullChunk.fetch", "os.WriteFile"}:         "a file of the pull's own staging directory",
	{"seeds/artifact/seed/file.go", "writeFileAtomic", "os.CreateTemp"}:           "seed.json the seal stage writes in its output directory",
	{"seeds/artifact/seed/raw.go", "qcow2Raw", "os.WriteFile"}:                    "a converted disk in the command's own temporary directory",
	{"seeds/artifact/seed/seedtest/seedtest.go", "Write", "os.WriteFile"}:         "test fixtures (a test helper package)",
	{"seeds/artifact/seed/seedtest/seedtest.go", "writeDisk", "os.WriteFile"}:     "test fixtures (a test helper package)",
	{"seeds/artifact/seed/seedtest/seedtest.go", "writeSBOM", "os.WriteFile"}:     "test fixtures (a test helper package)",
	{"seeds/artifact/trust/keys.go", "writeNew", "os.OpenFile O_CREATE"}:          "PREFIX.key and PREFIX.pub, after output.CheckAll; O_EXCL because a key is never replaced, as output.Write's rename would",
	{"seeds/contract/precachedisk/layout.go", "AddAgent", "os.OpenFile O_CREATE"}: "the precache layout the build writes",
	{"seeds/contract/precachedisk/layout.go", "CreateLayout", "os.WriteFile"}:     "the precache layout the build writes",
	{"seeds/contract/precachedisk/layout.go", "writeIndexFile", "os.WriteFile"}:   "the precache layout the build writes",
	{"seeds/contract/precachedisk/read.go", "extractor.unpack", "os.WriteFile"}:   "on the node: the precache disk unpacked into its own directory",
	{"seeds/contract/precachedisk/read.go", "unpackBlob", "os.CreateTemp"}:        "on the node: the precache disk unpacked into its own directory",
	{"seeds/contract/precachedisk/write.go", "Write", "os.Create"}:                "the precache disk image in the stage's output directory",
	{"seeds/node/agent/report.go", "nextSeq", "os.OpenFile O_CREATE"}:             "on the node: the seed's own files under the sysroot, not a path a user names",
	{"seeds/node/agent/seal.go", "writeUnder", "os.WriteFile"}:                    "on the node: the seed's own files under the sysroot, not a path a user names",
	{"seeds/node/agent/seal_openshift.go", "writeFileMode", "os.WriteFile"}:       "on the node: the seed's own files under the sysroot, not a path a user names",
	{"seeds/node/agent/sealrequest.go", "SaveSealRequest", "os.WriteFile"}:        "on the node: the seed's own files under the sysroot, not a path a user names",
	{"seeds/node/agent/sealrequest.go", "WriteFailureLog", "os.WriteFile"}:        "on the node: the seed's own files under the sysroot, not a path a user names",
	{"seeds/node/agent/unitrun.go", "UnitRunner.runUnit", "os.OpenFile O_CREATE"}: "on the node: the seed's own files under the sysroot, not a path a user names",
	{"seeds/node/reconfigure/files.go", "writeFile", "os.CreateTemp"}:             "on the node: the seed's own files under the sysroot, not a path a user names",
	{"seeds/site/siteconfig/isotest/isotest.go", "Write", "os.Create"}:            "test fixtures (a test helper package)",
	{"stages/install/gather.go", "follower.gather", "os.WriteFile"}:               "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/install/stage.go", "installRequest", "os.WriteFile"}:                 "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/internal/registries/inputs.go", "writePrivate", "os.WriteFile"}:      "a SystemContext's private directory in the stage's scratch: checked copies of registries.conf and policy.json, the pull secret, the drop-in; never a path a user names",
	{"stages/internal/vm/accel.go", "runProbe", "os.WriteFile"}:                   "a probe's scratch file in a temporary directory",
	{"stages/internal/vm/machine.go", "copyFile", "os.WriteFile"}:                 "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/liveiso/coreiso/coreisotest/fixtures.go", "Fixture", "os.Create"}:    "test fixtures (a test helper package)",
	{"stages/liveiso/coreiso/rebuild.go", "rebuildInto", "os.OpenFile O_CREATE"}:  "the copy grown in the rebuild's own work directory, then written over the ISO opened in place or the output device",
	{"stages/liveiso/coreiso/rebuild.go", "writeRebuildFiles", "os.WriteFile"}:    "xorriso's inputs in the rebuild's own work directory",
	{"stages/liveiso/stage.go", "runStage", "os.WriteFile"}:                       "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/precache/layout.go", "copyFile", "os.OpenFile O_CREATE"}:             "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/precache/stage.go", "run", "os.WriteFile"}:                           "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/publish/stage.go", "attest", "os.WriteFile"}:                         "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/publish/stage.go", "run", "os.WriteFile"}:                            "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/resolve/image.go", "client.extractFileWith", "os.OpenFile O_CREATE"}: "a file extracted from a release image into the stage's scratch",
	{"stages/seal/boot.go", "sealDisk", "os.WriteFile"}:                           "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/seal/credentials.go", "writeCredentials", "os.WriteFile"}:            "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/seal/disk.go", "compressZstd", "os.OpenFile O_CREATE"}:               "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/seal/disk.go", "writeChunked", "os.WriteFile"}:                       "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/seal/sbom.go", "writeSBOM", "os.WriteFile"}:                          "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/validate/report.go", "WriteReports", "os.WriteFile"}:                 "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
	{"stages/validate/stage.go", "writeInventory", "os.WriteFile"}:                "a stage's file in its output or scratch directory (pipeline.CheckDirs checked the directory)",
}

// TestOutputsGoThroughOneWriter finds every raw file creation in cmd/, seeds/, stages/,
// pipeline/ and blueprints/ (pipeline/output itself aside) and checks it against
// rawWritesAllowed, both ways: a creation not listed may write a user-named output past
// the output rules, an entry with no creation is stale.
func TestOutputsGoThroughOneWriter(t *testing.T) {
	found := findRawCalls(t, func(rel string) bool { return strings.HasPrefix(rel, "pipeline/output/") }, rawWrite)
	checkAllowlist(t, found, rawWritesAllowed, "rawWritesAllowed",
		"write an output a user names with output.Write (docs/inputs.md, Outputs)", "creates a file")
}

// rawWrite names a raw file creation: os.Create, os.CreateTemp, os.WriteFile, and
// os.OpenFile whose flags name O_CREATE.
func rawWrite(pkg, name string, c *ast.CallExpr) (string, bool) {
	if pkg != "os" {
		return "", false
	}
	switch call := "os." + name; call {
	case "os.Create", "os.CreateTemp", "os.WriteFile":
		return call, true
	case "os.OpenFile":
		if len(c.Args) > 1 && mentions(c.Args[1], "O_CREATE") {
			return call + " O_CREATE", true
		}
	}
	return "", false
}

// mentions tells whether expression e uses the identifier name (os.O_CREATE, unix.O_CREAT).
func mentions(e ast.Expr, name string) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, strings.TrimSuffix(name, "E")) {
			found = true
		}
		return !found
	})
	return found
}
