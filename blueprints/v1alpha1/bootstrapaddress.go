package v1alpha1

import (
	"fmt"
	"net/netip"
)

// FactoryGuestAddr is the address qemu's user network gives the factory VM by DHCP (its
// defaults: net 10.0.2.0/24, dhcpstart 10.0.2.15; qemu-options.hx, -netdev user).
var FactoryGuestAddr = netip.MustParseAddr("10.0.2.15")

// AddressField names the input a BootstrapAddressError is about.
type AddressField int

// The inputs of BootstrapAddress.
const (
	FieldNodeIP          AddressField = iota // the internal node address
	FieldServiceNetwork                      // serviceNetwork[Index]
	FieldMachineNetwork                      // machineNetwork[Index]
	FieldMachineNetworks                     // the machine network list as a whole
)

// BootstrapAddressError says why the bootstrap etcd would not take the internal node
// address, naming the input to change.
type BootstrapAddressError struct {
	Field AddressField
	Index int
	// Parse is set when an input is not a CIDR; Validate reports those on their own.
	Parse bool
	// Outside is set when the internal node address lies outside the network named.
	Outside bool
	Msg     string
	Hint    string
}

func (e *BootstrapAddressError) Error() string {
	var msg string
	switch e.Field {
	case FieldNodeIP:
		msg = "internal node address " + e.Msg
	case FieldServiceNetwork:
		msg = fmt.Sprintf("serviceNetwork[%d] %s", e.Index, e.Msg)
	case FieldMachineNetwork:
		msg = fmt.Sprintf("machineNetwork[%d] %s", e.Index, e.Msg)
	default:
		msg = e.Msg
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// BootstrapAddress checks that the bootstrap etcd of a bootstrap-in-place install will take
// the internal node address (nodeIP, a prefix) and returns it. cluster-etcd-operator's
// render takes one machine network, the first of the primary family (IPv6 when the first
// service network is: pkg/cmd/render/render.go getMachineCIDR and preferIPv6), and
// getBootstrapIP (pkg/cmd/render/bootstrap_ip.go) keeps only addresses inside it, the first
// it lists winning. So that network must contain the internal address and not the factory
// VM's own, which its interface lists first. machine and service are the networks after
// defaulting (non-empty); a machine network defaulted to the node IP's subnet passes.
func BootstrapAddress(machine, service []string, nodeIP string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(nodeIP)
	if err != nil {
		return netip.Prefix{}, &BootstrapAddressError{Field: FieldNodeIP, Parse: true, Msg: err.Error()}
	}
	if len(service) == 0 {
		return netip.Prefix{}, &BootstrapAddressError{Field: FieldServiceNetwork, Parse: true, Msg: "no service network"}
	}
	first, err := netip.ParsePrefix(service[0])
	if err != nil {
		return netip.Prefix{}, &BootstrapAddressError{Field: FieldServiceNetwork, Parse: true, Msg: err.Error()}
	}
	if first.Addr().Is6() != p.Addr().Is6() {
		return netip.Prefix{}, &BootstrapAddressError{Field: FieldNodeIP,
			Msg:  fmt.Sprintf("%s is not of the cluster's primary family (the first service network, %s): the bootstrap etcd would take an address of the other family", p, first),
			Hint: "use an internal address of the first service network's family, or list a service network of its family first"}
	}
	for i, m := range machine {
		n, err := netip.ParsePrefix(m)
		if err != nil {
			return netip.Prefix{}, &BootstrapAddressError{Field: FieldMachineNetwork, Index: i, Parse: true, Msg: err.Error()}
		}
		if n.Addr().Is6() != p.Addr().Is6() {
			continue
		}
		if !n.Contains(p.Addr()) {
			return netip.Prefix{}, &BootstrapAddressError{Field: FieldMachineNetwork, Index: i, Outside: true,
				Msg:  fmt.Sprintf("%s, the first machine network of its family, does not contain the internal node address %s: the bootstrap etcd takes its address from that network alone", n, p.Addr()),
				Hint: fmt.Sprintf("list %s first", p.Masked())}
		}
		if n.Contains(FactoryGuestAddr) {
			return netip.Prefix{}, &BootstrapAddressError{Field: FieldMachineNetwork, Index: i,
				Msg:  fmt.Sprintf("%s contains the factory VM's own address %s (qemu's user network), which the bootstrap etcd would take instead of the internal node address %s", n, FactoryGuestAddr, p.Addr()),
				Hint: "use a machine network and internal address outside 10.0.2.0/24"}
		}
		return p, nil
	}
	return netip.Prefix{}, &BootstrapAddressError{Field: FieldMachineNetworks, Outside: true,
		Msg:  fmt.Sprintf("no machine network of the internal node address %s's family", p),
		Hint: fmt.Sprintf("add %s", p.Masked())}
}
