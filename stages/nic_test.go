package stages

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline/badinput"
)

func TestCheckSeedBootInputs(t *testing.T) {
	tap0 := "tap,ifname=tap0,script=no,downscript=no"
	for _, tc := range []struct {
		name           string
		forwards, nics []string
		wantFw         []Forward
		want           []NIC
		wantErr        string
	}{
		{name: "none", want: []NIC{}},
		{name: "forwards alone", forwards: []string{"8080:10.0.2.50:80"}, wantFw: []Forward{{HostPort: 8080, GuestAddr: "10.0.2.50", GuestPort: 80}}, want: []NIC{}},
		{name: "a bond's two NICs get fixed MACs in order", nics: []string{tap0, "tap,ifname=tap1,script=no,downscript=no"},
			want: []NIC{{Netdev: tap0, MAC: "52:54:00:5f:00:01"}, {Netdev: "tap,ifname=tap1,script=no,downscript=no", MAC: "52:54:00:5f:00:02"}}},
		{name: "mac= is the NIC's, not the backend's", nics: []string{"socket,mac=52:54:00:AA:00:07,connect=127.0.0.1:5000"},
			want: []NIC{{Netdev: "socket,connect=127.0.0.1:5000", MAC: "52:54:00:aa:00:07"}}},
		{name: "a doubled comma stays in its value", nics: []string{"dgram,local.type=unix,local.path=/t/a,,b"},
			want: []NIC{{Netdev: "dgram,local.type=unix,local.path=/t/a,,b", MAC: "52:54:00:5f:00:01"}}},
		{name: "a doubled comma cannot smuggle an id", nics: []string{"tap,ifname=x,,id=y"},
			want: []NIC{{Netdev: "tap,ifname=x,,id=y", MAC: "52:54:00:5f:00:01"}}},
		{name: "forwards and NICs", forwards: []string{"8080:10.0.2.50:80"}, nics: []string{tap0},
			wantErr: "--forward uses the default NIC on qemu's user network, which --nic replaces: forward on a NIC of its own instead, e.g. --nic user,hostfwd=tcp:127.0.0.1:8080-10.0.2.50:80"},
		{name: "bad forward", forwards: []string{"8080:80"}, wantErr: `--forward "8080:80": want HOSTPORT:GUESTADDR:GUESTPORT, e.g. 8080:10.0.2.50:8080`},
		{name: "unknown backend", nics: []string{"ifname=tap0"},
			wantErr: `--nic "ifname=tap0": the backend "ifname=tap0" is not one of tap, bridge, socket, stream, dgram, user, vde (qemu's -netdev TYPE,OPTIONS)`},
		{name: "a hub port is no wire", nics: []string{"hubport,hubid=0"}, wantErr: `--nic "hubport,hubid=0": the backend "hubport" is not one of`},
		{name: "id", nics: []string{"tap,id=n0,ifname=tap0"}, wantErr: `--nic "tap,id=n0,ifname=tap0": leave out id=: snofactory names each NIC's netdev itself`},
		{name: "multicast MAC", nics: []string{"tap,mac=01:00:5e:00:00:01"}, wantErr: `--nic "tap,mac=01:00:5e:00:00:01": mac=01:00:5e:00:00:01 is not a unicast Ethernet address such as 52:54:00:12:34:56`},
		{name: "not a MAC", nics: []string{"tap,mac=52:54"}, wantErr: "mac=52:54 is not a unicast Ethernet address"},
		{name: "more NICs than slots", nics: make([]string, 17), wantErr: "--nic given 17 times: the VM has PCI slots for 16 NICs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw, nics, err := CheckSeedBootInputs("", tc.forwards, tc.nics)
			if tc.wantErr != "" {
				var bad *badinput.Error
				if err == nil || !errors.As(err, &bad) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want the caller's input refused with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(fw, tc.wantFw) || !reflect.DeepEqual(nics, tc.want) {
				t.Errorf("got %v, %v, %v; want %v, %v", fw, nics, err, tc.wantFw, tc.want)
			}
		})
	}
}

// TestNICNamesFollowTheSlots: the names a site config uses are the slot names of the NICs'
// PCI slots, from vm.NICSlot.
func TestNICNamesFollowTheSlots(t *testing.T) {
	if NICName(0) != "ens16" || NICName(1) != "ens17" {
		t.Errorf("NIC names %s, %s; want ens16, ens17", NICName(0), NICName(1))
	}
}
