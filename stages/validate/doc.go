// Package validate is the validation gate's library: the checks that must pass before a
// seed is sealed, and the reports they produce.
//
// A check has an id (KnownChecks lists them all), a severity (error fails the gate, warning
// does not) and a result (pass, fail, skip, error) with short evidence. Evaluate runs every
// check: the host checks over the Facts the guest agent sent from a boot of the installed
// disk (the Ignition config applied, boot from disk, precached images present with their
// locked digests, no bootstrap leftovers, free space, clock), and the OpenShift checks
// through the cluster's API with client-go (ClusterVersion, ClusterOperators, the node,
// CSRs, topology, MachineConfigPool and the relocation MachineConfigs, ingress pinning for
// day-2 workers, certificate lifetimes against the shipment window). Checks a blueprint
// skips, and checks that do not apply, are recorded as skipped with their reason, so the
// report always lists every check. WriteReports writes the report as JSON and JUnit XML.
// A node that passes also leaves its inventory (InventoryFile: the OS packages and
// snofactory binaries from the facts) for the seal's SBOM.
//
// Certificate lifetimes are read where the API or the agent can see them: the API server's
// serving certificate through a TLS handshake with the API endpoint; the kubelet's client
// and serving certificates from the agent's facts (the node's current PEM files, metadata
// only) or, without facts, from the newest issued CertificateSigningRequest of the node for
// each signer (CSRs are garbage-collected an hour after issue, so facts are preferred).
// The kubelet's own endpoint (port 10250) is not forwarded to the host and is not used.
package validate
