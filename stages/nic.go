package stages

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// NIC is one of a booted seed's NICs in place of the default one on qemu's user network:
// a virtio NIC on a qemu netdev backend (seed boot --nic).
type NIC struct {
	// Netdev is qemu's -netdev option list without its id, e.g.
	// "tap,ifname=tap0,script=no,downscript=no".
	Netdev string
	// MAC is the NIC's address; DefaultNICMAC(i) unless the spec gave one.
	MAC string
}

// DefaultNICMAC is the MAC of the i-th NIC (from 0) whose spec names none: fixed, so a site
// config written before the boot can match the NICs by MAC as well as by name.
func DefaultNICMAC(i int) string { return fmt.Sprintf("52:54:00:5f:00:%02x", i+1) }

// NICName is the name the guest's udev gives the i-th NIC: it sits in PCI slot
// vm.NICSlot+i, and udev names a NIC by its slot (see vm.NICSlot).
func NICName(i int) string { return fmt.Sprintf("ens%d", vm.NICSlot+i) }

// nicBackends are the netdev backends a seed's NIC may use (qemu qapi/net.json
// NetClientDriver, less those that are no wire: none, nic, hubport).
var nicBackends = []string{"tap", "bridge", "socket", "stream", "dgram", "user", "vde"}

// CheckSeedBootInputs checks seed boot's --site-config medium (CheckSiteMedium) and reads
// its --forward and --nic values, before any pull or VM. NICs replace the default
// user-network NIC the forwards use, so both at once are refused with the spec that
// forwards on a NIC of its own.
func CheckSeedBootInputs(siteConfig string, forwards, nics []string) ([]Forward, []NIC, error) {
	if err := CheckSiteMedium(siteConfig); err != nil {
		return nil, nil, err
	}
	fw, err := ParseForwards(forwards)
	if err != nil {
		return nil, nil, badinput.Wrap(fmt.Errorf("--forward %w", err))
	}
	if len(fw) > 0 && len(nics) > 0 {
		return nil, nil, badinput.Wrap(fmt.Errorf("--forward uses the default NIC on qemu's user network, which --nic replaces: forward on a NIC of its own instead, e.g. --nic user,hostfwd=tcp:127.0.0.1:%d-%s:%d",
			fw[0].HostPort, fw[0].GuestAddr, fw[0].GuestPort))
	}
	if len(nics) > vm.MaxNICs {
		return nil, nil, badinput.Wrap(fmt.Errorf("--nic given %d times: the VM has PCI slots for %d NICs", len(nics), vm.MaxNICs))
	}
	out := make([]NIC, 0, len(nics))
	for i, spec := range nics {
		n, err := parseNIC(spec, i)
		if err != nil {
			return nil, nil, badinput.Wrap(fmt.Errorf("--nic %q: %w", spec, err))
		}
		out = append(out, n)
	}
	return fw, out, nil
}

// parseNIC splits the spec's options as qemu does (a comma ends an option unless doubled),
// takes out mac= (a NIC's option, not the backend's) and refuses what would break the
// command line: an unknown backend, an id (snofactory names the netdev).
func parseNIC(spec string, i int) (NIC, error) {
	opts := strings.Split(strings.ReplaceAll(spec, ",,", "\x00"), ",")
	if !slices.Contains(nicBackends, opts[0]) {
		return NIC{}, fmt.Errorf("the backend %q is not one of %s (qemu's -netdev TYPE,OPTIONS)", opts[0], strings.Join(nicBackends, ", "))
	}
	n := NIC{MAC: DefaultNICMAC(i)}
	keep := opts[:1]
	for _, o := range opts[1:] {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "id":
			return NIC{}, errors.New("leave out id=: snofactory names each NIC's netdev itself")
		case "mac":
			hw, err := net.ParseMAC(v)
			if err != nil || len(hw) != 6 || hw[0]&1 != 0 {
				return NIC{}, fmt.Errorf("mac=%s is not a unicast Ethernet address such as 52:54:00:12:34:56", v)
			}
			n.MAC = hw.String()
		default:
			keep = append(keep, o)
		}
	}
	n.Netdev = strings.ReplaceAll(strings.Join(keep, ","), "\x00", ",,")
	return n, nil
}
