package ociseed

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Transports a Location can use, named as containers/image names them.
const (
	TransportRegistry   = "docker"
	TransportLayout     = "oci"
	TransportOCIArchive = "oci-archive"
)

// DefaultTag names the seed in an OCI layout or archive when the location gives no tag.
const DefaultTag = "latest"

// Location is where a seed is pushed to or pulled from.
type Location struct {
	Transport string
	// Ref is the registry reference (TransportRegistry only).
	Ref name.Reference
	// Path is the layout directory or archive file, Tag the name inside it (layout and
	// archive only; DefaultTag when none was given).
	Path, Tag string
}

func (l Location) String() string {
	if l.Transport == TransportRegistry {
		return l.Ref.String()
	}
	return l.Transport + ":" + l.Path + ":" + l.Tag
}

// ParseLocation reads "oci:DIR[:TAG]", "oci-archive:FILE[:TAG]" or a registry reference,
// with or without "docker://". A registry reference names its registry: there is no
// implicit docker.io, so a mistyped local path never goes to the network. insecure lets a registry be reached over plain HTTP;
// loopback registries (127.0.0.1, localhost) are plain HTTP anyway, as everywhere else.
func ParseLocation(s string, insecure bool) (Location, error) {
	for _, t := range []string{TransportOCIArchive, TransportLayout} {
		rest, ok := strings.CutPrefix(s, t+":")
		if !ok {
			continue
		}
		// As containers/image does: the path ends at the first colon.
		path, tag, _ := strings.Cut(rest, ":")
		if path == "" {
			return Location{}, fmt.Errorf("%s: no path after %s:", s, t)
		}
		if tag == "" {
			tag = DefaultTag
		}
		return Location{Transport: t, Path: path, Tag: tag}, nil
	}
	bare := strings.TrimPrefix(s, "docker://")
	if host, _, ok := strings.Cut(bare, "/"); !ok || !strings.ContainsAny(host, ".:") && host != "localhost" {
		return Location{}, fmt.Errorf("%q names no registry: write the reference in full, e.g. registry.example.com/seeds/NAME:TAG (there is no default registry)", s)
	}
	var nopts []name.Option
	if insecure {
		nopts = append(nopts, name.Insecure)
	}
	ref, err := name.ParseReference(bare, nopts...)
	if err != nil {
		return Location{}, fmt.Errorf("parsing the seed reference %q: %w", s, err)
	}
	return Location{Transport: TransportRegistry, Ref: ref}, nil
}
