// Package reconfigure is the seed's site reconfiguration hook, the on-node side of
// `snofactory agent reconfigure`: on a sealed seed's first boot at its edge site it waits
// for the site-config medium (volume label siteconfig.VolumeLabel), then applies the site
// config step by step (network, hostname, DNS, NTP, pull secret, registry mirrors, SSH keys,
// manifests; on OpenShift also recert, kubelet start and the wait for the API), reporting
// each step over the agent channel. Progress is recorded on disk under the installed root
// and keyed by the site config's digest, so a run cut short by a power loss resumes where it
// stopped, and a different site config starts over. A missing or malformed medium applies
// nothing, so the seed stays bootable until the technician fixes the medium and reboots. A
// seed that carries site keys (siteconfig.NodeKeysDir) takes only a medium signed by one of
// them; any other is refused with its reason and passed over while the hook waits on.
package reconfigure
