package coreiso

import (
	"errors"
	"fmt"
	"os"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// ISO is an opened live ISO with its located areas. It is read-only; changes
// go through Customize.
type ISO struct {
	Path   string
	Layout *Layout
	f      *os.File
	size   int64
}

// Open reads the layout of the live ISO at path.
func Open(path string) (*ISO, error) {
	f, err := smallfile.Open(path)
	if errors.Is(err, smallfile.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %w", ErrNotISO, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening ISO: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	fs, err := openISOFS(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	l, err := readLayout(fs)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &ISO{Path: path, Layout: l, f: f, size: st.Size()}, nil
}

// Close releases the file.
func (i *ISO) Close() error { return i.f.Close() }

// area reads the raw embed area.
func (i *ISO) area() ([]byte, error) {
	a := i.Layout.Ignition
	buf := make([]byte, a.Length)
	if _, err := i.f.ReadAt(buf, a.Offset); err != nil {
		return nil, fmt.Errorf("%s: reading the Ignition embed area at %d: %w", i.Path, a.Offset, err)
	}
	return buf, nil
}

// Initrd decodes the embed area (empty if it is all zeros).
func (i *ISO) Initrd() (*Initrd, error) {
	buf, err := i.area()
	if err != nil {
		return nil, err
	}
	in, err := ParseInitrd(buf)
	if err != nil {
		return nil, fmt.Errorf("%s: Ignition embed area at %d: %w", i.Path, i.Layout.Ignition.Offset, err)
	}
	return in, nil
}

// Ignition returns the embedded config, or ErrNoConfig.
func (i *ISO) Ignition() ([]byte, error) {
	in, err := i.Initrd()
	if err != nil {
		return nil, err
	}
	cfg, ok := in.Get(IgnitionPath)
	if !ok {
		return nil, fmt.Errorf("%s: %w", i.Path, ErrNoConfig)
	}
	return cfg, nil
}

// Kargs returns the current kernel arguments (all areas agree, or an error).
func (i *ISO) Kargs() (string, error) {
	if i.Layout.Kargs == nil {
		return "", fmt.Errorf("%s: %w", i.Path, ErrNoKargsArea)
	}
	return currentKargs(i.Path, i.f, i.Layout.Kargs)
}

// DefaultKargs returns the kernel arguments the ISO was built with.
func (i *ISO) DefaultKargs() (string, error) {
	if i.Layout.Kargs == nil {
		return "", fmt.Errorf("%s: %w", i.Path, ErrNoKargsArea)
	}
	return i.Layout.Kargs.Default, nil
}

// ShowIgnition returns the config embedded in the ISO at path.
func ShowIgnition(path string) ([]byte, error) {
	iso, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer iso.Close()
	return iso.Ignition()
}

// ShowKargs returns the current (or, with defaults, the original) kernel
// arguments of the ISO at path.
func ShowKargs(path string, defaults bool) (string, error) {
	iso, err := Open(path)
	if err != nil {
		return "", err
	}
	defer iso.Close()
	if defaults {
		return iso.DefaultKargs()
	}
	return iso.Kargs()
}

// ShowNetwork returns the NetworkManager keyfiles embedded in the ISO, by file name.
func ShowNetwork(path string) (map[string][]byte, error) {
	iso, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer iso.Close()
	in, err := iso.Initrd()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, p := range in.filesUnder(NetworkDir) {
		d, _ := in.Get(p)
		out[p[len(NetworkDir)+1:]] = d
	}
	return out, nil
}
