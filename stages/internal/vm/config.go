package vm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// Firmware selects the boot firmware.
type Firmware string

const (
	FirmwareBIOS Firmware = "bios"
	FirmwareUEFI Firmware = "uefi"
)

// Disk is a block device attached with virtio-blk.
type Disk struct {
	Path   string
	Format string // qcow2 or raw; empty means qcow2
	// ReadOnly attaches the disk read-only (e.g. a precache data disk).
	ReadOnly bool
	// Serial is shown to the guest (/dev/disk/by-id/virtio-SERIAL).
	Serial string
	// BootIndex orders the boot devices (1 first); 0 leaves the disk out of the order.
	BootIndex int
	// Discard passes the guest's discards (fstrim) through, so freed blocks leave the image.
	Discard bool
}

// Config describes one VM.
type Config struct {
	Name string
	// QemuBinary defaults to qemu-system-x86_64 on PATH.
	QemuBinary string
	// ISO is attached as an IDE CD-ROM when set.
	ISO   string
	Disks []Disk
	// MemoryMiB and CPUs default to 1024 and 1.
	MemoryMiB int
	CPUs      int
	Firmware  Firmware
	// OVMFCode and OVMFVars locate UEFI firmware; empty searches /usr/share/OVMF.
	OVMFCode, OVMFVars string
	// BootOrder is qemu's -boot order, e.g. "cd": the first disk, then the CD-ROM. An
	// empty target disk is skipped by the BIOS, so "cd" boots the ISO until the OS is
	// installed and the disk afterwards, as a factory server would. UEFI firmware ignores
	// it: give the devices boot indexes instead (Disk.BootIndex, ISOBootIndex).
	BootOrder string
	// ISOBootIndex places the CD-ROM in the boot order (0: not in it).
	ISOBootIndex int
	// NoReboot makes a guest reboot end qemu instead of restarting the VM.
	NoReboot bool
	// ConsoleLog receives the serial console (ttyS0).
	ConsoleLog string
	// AgentPort is the virtio-serial port name; empty means wire.DefaultPortName.
	AgentPort string
	// GatherFile, when set, receives what the guest writes to wire.GatherPortName.
	GatherFile string
	// Network, when set, gives the guest one virtio NIC on qemu's user-mode network.
	Network *UserNetwork
	// NICs are more virtio NICs, each on a netdev backend of its own (a tap, a socket).
	NICs []NIC
	// SystemSerial, when set, is the serial number the firmware reports for the machine
	// (SMBIOS type 1), as a server's does: a site-config medium may be bound to it.
	SystemSerial string
	// ExtraArgs are appended to the qemu command line.
	ExtraArgs []string
}

// UserNetwork is qemu's user-mode (slirp) network: the guest reaches out through the host,
// and the host reaches the guest only through the forwarded ports, on 127.0.0.1.
type UserNetwork struct {
	Forwards []Forward
}

// NIC is a virtio NIC on a qemu netdev backend: Netdev is -netdev's option list without
// its id (e.g. "tap,ifname=tap0,script=no,downscript=no"), MAC the NIC's address.
type NIC struct {
	Netdev, MAC string
}

// NICSlot is the PCI slot of NICs[0]; the others follow. Every slot of qemu's pc machine
// is an ACPI hot-plug slot, so udev names the NIC in slot N "ensN" (systemd
// src/udev/udev-builtin-net_id.c, ID_NET_NAME_SLOT, which the default NamePolicy prefers
// to the path name): a site config can name the NICs before the first boot.
const NICSlot = 0x10

// MaxNICs is how many slots follow NICSlot on the pc machine's bus (slots end at 0x1f).
const MaxNICs = 0x20 - NICSlot

// args attaches the NIC as virtio NIC number i, in slot NICSlot+i. The netdev spec is
// passed as given: its options are qemu's own, and it is the caller's backend.
func (n NIC) args(i int) []string {
	id := fmt.Sprintf("nic%d", i)
	dev := fmt.Sprintf("virtio-net-pci,netdev=%s,addr=0x%x", id, NICSlot+i)
	if n.MAC != "" {
		dev += ",mac=" + optValue(n.MAC)
	}
	return []string{"-netdev", n.Netdev + ",id=" + id, "-device", dev}
}

// Forward sends connections to 127.0.0.1:HostPort on the host to GuestPort in the guest,
// at GuestAddr when set (the address the guest must have for the connection to succeed)
// or at the guest's DHCP address.
type Forward struct {
	HostPort, GuestPort int
	GuestAddr           string
}

// FreePort is a TCP port on 127.0.0.1 nothing listens on right now, for a Forward.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port to forward: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cpuModel is the guest CPU. Under KVM the host's. Under TCG qemu's default, qemu64, lacks
// SSSE3, SSE4.1/4.2 and POPCNT, so it is not x86-64-v2, which RHEL 9 kernels (RHCOS, from
// OpenShift 4.13) require to boot; "max" is every feature TCG emulates, x86-64-v2 included
// (qemu 7.2's query-cpu-model-expansion of max lists sse4.2, popcnt, ssse3, cx16 and
// lahf-lm), and every qemu knows it, unlike the x86-64-v2 named models of later releases.
func cpuModel(acc Accelerator) string {
	if acc.Name == AccelKVM {
		return "host"
	}
	return "max"
}

// GuestPath is the name the guest's udev gives a disk with a serial: systemd's
// rules.d/60-persistent-storage.rules link a virtio-blk disk as disk/by-id/virtio-$serial.
// Unlike a by-path name, it does not depend on the PCI slot the disk lands in, which
// follows the order of qemu's -device arguments. "" when the disk has no serial.
func (d Disk) GuestPath() string {
	if d.Serial == "" {
		return ""
	}
	return "/dev/disk/by-id/virtio-" + d.Serial
}

// maxSerial is the longest serial virtio-blk hands the guest (VIRTIO_BLK_ID_BYTES):
// longer ones are cut, and the by-id name with them.
const maxSerial = 20

// args attaches the disk as virtio-blk device number i.
func (d Disk) args(i int) []string {
	format := d.Format
	if format == "" {
		format = "qcow2"
	}
	drive := fmt.Sprintf("file=%s,format=%s,if=none,id=disk%d", optValue(d.Path), optValue(format), i)
	if d.ReadOnly {
		drive += ",readonly=on"
	}
	if d.Discard {
		drive += ",discard=unmap,detect-zeroes=unmap"
	}
	dev := fmt.Sprintf("virtio-blk-pci,drive=disk%d", i)
	if d.Serial != "" {
		dev += ",serial=" + optValue(d.Serial)
	}
	if d.BootIndex > 0 {
		dev += fmt.Sprintf(",bootindex=%d", d.BootIndex)
	}
	return []string{"-drive", drive, "-device", dev}
}

func (n *UserNetwork) args() []string {
	netdev := "user,id=net0"
	for _, f := range n.Forwards {
		netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-%s:%d", f.HostPort, optValue(f.GuestAddr), f.GuestPort)
	}
	return []string{"-netdev", netdev, "-device", "virtio-net-pci,netdev=net0"}
}

func (c Config) qemu() string {
	if c.QemuBinary != "" {
		return c.QemuBinary
	}
	return "qemu-system-x86_64"
}

func (c Config) validate() error {
	var errs []error
	if c.ISO == "" && len(c.Disks) == 0 {
		errs = append(errs, errors.New("nothing to boot: no ISO and no disks"))
	}
	if c.ConsoleLog == "" {
		errs = append(errs, errors.New("no console log path"))
	}
	if len(c.NICs) > MaxNICs {
		errs = append(errs, fmt.Errorf("%d NICs: the machine has slots for %d", len(c.NICs), MaxNICs))
	}
	if c.MemoryMiB < 0 || c.CPUs < 0 {
		errs = append(errs, errors.New("negative memory or CPU count"))
	}
	switch c.Firmware {
	case "", FirmwareBIOS, FirmwareUEFI:
	default:
		errs = append(errs, fmt.Errorf("unknown firmware %q (want bios or uefi)", c.Firmware))
	}
	for _, d := range c.Disks {
		if len(d.Serial) > maxSerial {
			errs = append(errs, fmt.Errorf("disk %s: serial %q is longer than the %d bytes virtio-blk passes to the guest", d.Path, d.Serial, maxSerial))
		}
	}
	return errors.Join(errs...)
}

// ovmf finds the UEFI code and variable-store templates.
func (c Config) ovmf() (code, vars string, err error) {
	code, vars = c.OVMFCode, c.OVMFVars
	pairs := [][2]string{
		{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
		{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},
	}
	if code == "" {
		for _, p := range pairs {
			if _, err := os.Stat(p[0]); err == nil {
				code, vars = p[0], p[1]
				break
			}
		}
	}
	if code == "" {
		return "", "", errors.New("UEFI firmware not found (install the Debian package ovmf)")
	}
	if vars == "" {
		return "", "", fmt.Errorf("UEFI firmware %s has no variable store template", code)
	}
	return code, vars, nil
}

// runtimePaths are the per-run files Args refers to.
type runtimePaths struct {
	AgentSocket string // unix socket the host listens on; qemu connects to it
	QMPSocket   string // qemu listens; the host sends machine commands (reset, powerdown)
	OVMFCode    string
	OVMFVars    string // a private, writable copy
}

// optValue escapes s for use as a value in a qemu option list
// ("file=PATH,format=raw"), where a comma ends the value unless doubled. Without
// it a path holding a comma breaks the command line or smuggles in options.
func optValue(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// args returns the qemu arguments (without the binary) for c. Every value that
// comes from outside (paths, names, serials) goes through optValue.
func (c Config) args(acc Accelerator, rp runtimePaths) []string {
	mem := c.MemoryMiB
	if mem == 0 {
		mem = 1024
	}
	cpus := c.CPUs
	if cpus == 0 {
		cpus = 1
	}
	port := c.AgentPort
	if port == "" {
		port = wire.DefaultPortName
	}
	name := c.Name
	if name == "" {
		name = "snofactory"
	}
	a := []string{
		"-name", optValue(name),
		"-machine", "pc",
		"-accel", string(acc.Name),
		"-m", strconv.Itoa(mem),
		"-smp", strconv.Itoa(cpus),
		"-nodefaults", "-no-user-config",
		"-display", "none",
		// -serial file:PATH takes the rest literally while -chardev parses an
		// option list; a named chardev gives one escaping rule for every path.
		"-chardev", "file,id=console0,path=" + optValue(c.ConsoleLog),
		"-serial", "chardev:console0",
	}
	a = append(a, "-cpu", cpuModel(acc))
	if c.Firmware == FirmwareUEFI {
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+optValue(rp.OVMFCode),
			"-drive", "if=pflash,format=raw,unit=1,file="+optValue(rp.OVMFVars))
	}
	if c.ISO != "" {
		a = append(a, "-drive", "file="+optValue(c.ISO)+",media=cdrom,if=ide,readonly=on")
		if c.ISOBootIndex > 0 {
			a = append(a, "-global", fmt.Sprintf("ide-cd.bootindex=%d", c.ISOBootIndex))
		}
	}
	for i, d := range c.Disks {
		a = append(a, d.args(i)...)
	}
	if c.BootOrder != "" {
		a = append(a, "-boot", "order="+optValue(c.BootOrder))
	}
	a = append(a,
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=agent0,path="+optValue(rp.AgentSocket),
		"-device", "virtserialport,bus=vser0.0,chardev=agent0,name="+optValue(port),
	)
	if c.GatherFile != "" {
		a = append(a,
			"-chardev", "file,id=gather0,path="+optValue(c.GatherFile),
			"-device", "virtserialport,bus=vser0.0,chardev=gather0,name="+wire.GatherPortName)
	}
	if rp.QMPSocket != "" {
		a = append(a, "-qmp", "unix:"+optValue(rp.QMPSocket)+",server=on,wait=off")
	}
	if c.NoReboot {
		a = append(a, "-no-reboot")
	}
	if c.Network != nil {
		a = append(a, c.Network.args()...)
	}
	for i, n := range c.NICs {
		a = append(a, n.args(i)...)
	}
	if c.SystemSerial != "" {
		a = append(a, "-smbios", "type=1,serial="+optValue(c.SystemSerial))
	}
	return append(a, c.ExtraArgs...)
}
