package coreiso

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// Where the embed areas are described.
const (
	ignInfoPath      = "coreos/igninfo.json"
	kargsInfoPath    = "coreos/kargs.json"
	featuresPath     = "coreos/features.json"
	defaultEmbedPath = "images/ignition.img"

	// Legacy headers at the end of the System Area: "coreiso+" (24 bytes) last,
	// "coreKarg" (72 bytes) just before it.
	legacyIgnHeaderOffset   = systemAreaSize - 24
	legacyKargsHeaderOffset = legacyIgnHeaderOffset - 72
	legacyKargsMaxAreas     = 6

	maxKargsSize    = 2048
	maxEmbedArea    = 256 << 20 // sanity bound: the area is read into memory
	maxInfoJSONSize = 64 << 10
)

// Area sources, reported so users can see which layout generation an ISO has.
const (
	SourceIgnInfo     = "igninfo.json"
	SourceIgnitionImg = "images/ignition.img"
	SourceLegacy      = "coreiso+ header"
	SourceKargsJSON   = "kargs.json"
	SourceKargsLegacy = "coreKarg header"
)

// EmbedArea is the byte range reserved for the Ignition initrd.
type EmbedArea struct {
	Offset int64  // absolute byte offset in the image
	Length int64  // bytes reserved
	Source string // which layout description located it
	// File is the ISO path holding the area ("" for the legacy header), and
	// WholeFile says the area is that entire file (so a rebuild can grow it).
	File      string
	WholeFile bool
}

// KargsArea is one copy of the kernel arguments inside a boot config file.
type KargsArea struct {
	Offset int64  // absolute byte offset in the image
	File   string // ISO path of the config file holding it ("" if unknown, legacy)
	// FileOffset is the offset inside File.
	FileOffset int64
	Pad, End   byte
}

// KargsLayout describes all karg areas; they must always hold the same arguments.
type KargsLayout struct {
	Size    int // bytes per area
	Default string
	Areas   []KargsArea
	Source  string
}

// Layout is what an ISO offers for customization.
type Layout struct {
	Ignition EmbedArea
	Kargs    *KargsLayout // nil when the ISO has no karg areas
	// Features is /coreos/features.json, nil if absent.
	Features map[string]json.RawMessage
}

// LiveInitrdNetwork reports whether the ISO's initramfs picks up NetworkManager
// keyfiles from the embed area.
func (l *Layout) LiveInitrdNetwork() bool {
	return string(l.Features["live-initrd-network"]) == "true"
}

type ignInfo struct {
	File   string `json:"file"`
	Offset *int64 `json:"offset"`
	Length *int64 `json:"length"`
}

type kargsInfo struct {
	Default string          `json:"default"`
	Files   []kargsInfoFile `json:"files"`
	Size    int             `json:"size"`
}

type kargsInfoFile struct {
	Path   string  `json:"path"`
	Offset int64   `json:"offset"`
	Pad    *string `json:"pad,omitempty"`
	End    *string `json:"end,omitempty"`
}

// readLayout locates the embed and karg areas of the image.
func readLayout(fs *isoFS) (*Layout, error) {
	l := &Layout{}
	var err error
	if l.Ignition, err = findEmbedArea(fs); err != nil {
		return nil, err
	}
	if l.Kargs, err = findKargsAreas(fs); err != nil {
		return nil, err
	}
	if f, err := fs.lookup(featuresPath); err == nil {
		raw, err := fs.readFile(f, maxInfoJSONSize)
		if err != nil {
			return nil, err
		}
		if err := strictjson.DecodeOpen(raw, &l.Features); err != nil {
			return nil, fmt.Errorf("%s: %w: /%s is not a JSON object: %v", fs.name, ErrMalformed, featuresPath, err)
		}
	} else if !errors.Is(err, errNotFound) {
		return nil, err
	}
	return l, nil
}

func findEmbedArea(fs *isoFS) (EmbedArea, error) {
	f, err := fs.lookup(ignInfoPath)
	switch {
	case err == nil:
		raw, err := fs.readFile(f, maxInfoJSONSize)
		if err != nil {
			return EmbedArea{}, err
		}
		info, err := parseIgnInfo(raw)
		if err != nil {
			return EmbedArea{}, fmt.Errorf("%s: /%s: %w", fs.name, ignInfoPath, err)
		}
		target, err := fs.lookup(info.File)
		if err != nil {
			if errors.Is(err, errNotFound) {
				return EmbedArea{}, fmt.Errorf("%s: %w: /%s names %q, which is not in the image", fs.name, ErrMalformed, ignInfoPath, info.File)
			}
			return EmbedArea{}, err
		}
		if target.IsDir {
			return EmbedArea{}, fmt.Errorf("%s: %w: /%s names directory %q", fs.name, ErrMalformed, ignInfoPath, info.File)
		}
		var off int64
		if info.Offset != nil {
			off = *info.Offset
		}
		length := target.Length - off
		if info.Length != nil {
			length = *info.Length
		}
		if off < 0 || length <= 0 || off+length > target.Length {
			return EmbedArea{}, fmt.Errorf("%s: %w: /%s: area (offset %d, length %d) lies outside %q (%d bytes)",
				fs.name, ErrMalformed, ignInfoPath, off, length, info.File, target.Length)
		}
		return checkArea(fs, EmbedArea{Offset: target.Offset + off, Length: length, Source: SourceIgnInfo,
			File: info.File, WholeFile: off == 0 && length == target.Length})
	case !errors.Is(err, errNotFound):
		return EmbedArea{}, err
	}
	if f, err := fs.lookup(defaultEmbedPath); err == nil && !f.IsDir && f.Length > 0 {
		return checkArea(fs, EmbedArea{Offset: f.Offset, Length: f.Length, Source: SourceIgnitionImg,
			File: defaultEmbedPath, WholeFile: true})
	} else if err != nil && !errors.Is(err, errNotFound) {
		return EmbedArea{}, err
	}
	hdr := make([]byte, 24)
	if _, err := fs.r.ReadAt(hdr, legacyIgnHeaderOffset); err != nil {
		return EmbedArea{}, fmt.Errorf("%s: reading the System Area: %w", fs.name, err)
	}
	if !hasPrefix(hdr, "coreiso+") {
		return EmbedArea{}, fmt.Errorf("%s: %w: no /%s, no /%s and no coreiso+ header", fs.name, ErrNoEmbedArea, ignInfoPath, defaultEmbedPath)
	}
	off := binary.LittleEndian.Uint64(hdr[8:])
	length := binary.LittleEndian.Uint64(hdr[16:])
	if off > uint64(fs.size) || length > uint64(fs.size) || length == 0 {
		return EmbedArea{}, fmt.Errorf("%s: %w: coreiso+ header points at offset %d length %d, outside the %d-byte image",
			fs.name, ErrMalformed, off, length, fs.size)
	}
	return checkArea(fs, EmbedArea{Offset: int64(off), Length: int64(length), Source: SourceLegacy})
}

func checkArea(fs *isoFS, a EmbedArea) (EmbedArea, error) {
	if a.Offset < systemAreaSize || a.Offset+a.Length > fs.size {
		return EmbedArea{}, fmt.Errorf("%s: %w: Ignition embed area (bytes %d..%d, from %s) lies outside the %d-byte image",
			fs.name, ErrMalformed, a.Offset, a.Offset+a.Length, a.Source, fs.size)
	}
	if a.Length > maxEmbedArea {
		return EmbedArea{}, fmt.Errorf("%s: %w: Ignition embed area of %d bytes is implausibly large", fs.name, ErrMalformed, a.Length)
	}
	return a, nil
}

// parseIgnInfo decodes igninfo.json strictly.
func parseIgnInfo(raw []byte) (ignInfo, error) {
	var info ignInfo
	if err := strictjson.DecodeOpen(raw, &info); err != nil {
		return info, fmt.Errorf("%w: not valid igninfo JSON: %v", ErrMalformed, err)
	}
	if info.File == "" {
		return info, fmt.Errorf("%w: \"file\" is missing", ErrMalformed)
	}
	if (info.Offset != nil && *info.Offset < 0) || (info.Length != nil && *info.Length <= 0) {
		return info, fmt.Errorf("%w: negative offset or non-positive length", ErrMalformed)
	}
	return info, nil
}

// ParseKargsJSON decodes and sanity-checks /coreos/kargs.json, without
// resolving its file paths.
func ParseKargsJSON(raw []byte) (*KargsLayout, error) {
	var info kargsInfo
	if err := strictjson.DecodeOpen(raw, &info); err != nil {
		return nil, fmt.Errorf("%w: not valid kargs JSON: %v", ErrMalformed, err)
	}
	if info.Size <= 0 || info.Size > maxKargsSize {
		return nil, fmt.Errorf("%w: \"size\" %d is outside 1..%d", ErrMalformed, info.Size, maxKargsSize)
	}
	if len(info.Default) >= info.Size {
		return nil, fmt.Errorf("%w: default kargs (%d bytes) do not fit the %d-byte areas", ErrMalformed, len(info.Default), info.Size)
	}
	if !utf8.ValidString(info.Default) {
		return nil, fmt.Errorf("%w: default kargs are not UTF-8", ErrMalformed)
	}
	if len(info.Files) == 0 {
		return nil, fmt.Errorf("%w: \"files\" lists no karg areas", ErrMalformed)
	}
	kl := &KargsLayout{Size: info.Size, Default: info.Default, Source: SourceKargsJSON}
	for i, f := range info.Files {
		if f.Path == "" {
			return nil, fmt.Errorf("%w: files[%d] has no \"path\"", ErrMalformed, i)
		}
		if f.Offset < 0 {
			return nil, fmt.Errorf("%w: files[%d] (%s) has negative offset %d", ErrMalformed, i, f.Path, f.Offset)
		}
		pad, err := oneByte(f.Pad, '#')
		if err != nil {
			return nil, fmt.Errorf("%w: files[%d] (%s) \"pad\": %v", ErrMalformed, i, f.Path, err)
		}
		end, err := oneByte(f.End, '\n')
		if err != nil {
			return nil, fmt.Errorf("%w: files[%d] (%s) \"end\": %v", ErrMalformed, i, f.Path, err)
		}
		kl.Areas = append(kl.Areas, KargsArea{File: f.Path, FileOffset: f.Offset, Pad: pad, End: end})
	}
	return kl, nil
}

func oneByte(s *string, def byte) (byte, error) {
	if s == nil {
		return def, nil
	}
	if len(*s) != 1 {
		return 0, fmt.Errorf("want exactly one ASCII character, got %q", *s)
	}
	return (*s)[0], nil
}

func findKargsAreas(fs *isoFS) (*KargsLayout, error) {
	f, err := fs.lookup(kargsInfoPath)
	if errors.Is(err, errNotFound) {
		return findLegacyKargsAreas(fs)
	}
	if err != nil {
		return nil, err
	}
	raw, err := fs.readFile(f, maxInfoJSONSize)
	if err != nil {
		return nil, err
	}
	kl, err := ParseKargsJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: /%s: %w", fs.name, kargsInfoPath, err)
	}
	for i := range kl.Areas {
		a := &kl.Areas[i]
		target, err := fs.lookup(a.File)
		if err != nil {
			if errors.Is(err, errNotFound) {
				return nil, fmt.Errorf("%s: %w: /%s names %q, which is not in the image", fs.name, ErrMalformed, kargsInfoPath, a.File)
			}
			return nil, err
		}
		if a.FileOffset+int64(kl.Size) > target.Length {
			return nil, fmt.Errorf("%s: %w: /%s: karg area at offset %d (+%d bytes) lies outside %q (%d bytes)",
				fs.name, ErrMalformed, kargsInfoPath, a.FileOffset, kl.Size, a.File, target.Length)
		}
		a.Offset = target.Offset + a.FileOffset
	}
	return kl, nil
}

func findLegacyKargsAreas(fs *isoFS) (*KargsLayout, error) {
	hdr := make([]byte, 72)
	if _, err := fs.r.ReadAt(hdr, legacyKargsHeaderOffset); err != nil {
		return nil, fmt.Errorf("%s: reading the System Area: %w", fs.name, err)
	}
	if !hasPrefix(hdr, "coreKarg") {
		return nil, nil
	}
	size := binary.LittleEndian.Uint64(hdr[8:])
	if size == 0 || size > maxKargsSize {
		return nil, fmt.Errorf("%s: %w: coreKarg header: area size %d is outside 1..%d", fs.name, ErrMalformed, size, maxKargsSize)
	}
	inImage := func(off uint64) bool {
		return off >= systemAreaSize && off <= uint64(fs.size) && off+size <= uint64(fs.size)
	}
	defOff := binary.LittleEndian.Uint64(hdr[16:])
	if !inImage(defOff) {
		return nil, fmt.Errorf("%s: %w: coreKarg header: default kargs at %d lie outside the image", fs.name, ErrMalformed, defOff)
	}
	kl := &KargsLayout{Size: int(size), Source: SourceKargsLegacy}
	buf := make([]byte, size)
	if _, err := fs.r.ReadAt(buf, int64(defOff)); err != nil {
		return nil, fmt.Errorf("%s: reading default kargs: %w", fs.name, err)
	}
	def, err := decodeKargsArea(buf, '#', '\n')
	if err != nil {
		return nil, fmt.Errorf("%s: default kargs: %w", fs.name, err)
	}
	kl.Default = def
	for i := 0; i < legacyKargsMaxAreas; i++ {
		off := binary.LittleEndian.Uint64(hdr[24+8*i:])
		if off == 0 {
			break
		}
		if !inImage(off) {
			return nil, fmt.Errorf("%s: %w: coreKarg header: area %d at %d lies outside the image", fs.name, ErrMalformed, i, off)
		}
		kl.Areas = append(kl.Areas, KargsArea{Offset: int64(off), Pad: '#', End: '\n'})
	}
	if len(kl.Areas) == 0 {
		return nil, fmt.Errorf("%s: %w: coreKarg header lists no areas", fs.name, ErrMalformed)
	}
	return kl, nil
}

// decodeKargsArea reads the arguments out of one area: text, end char, padding.
func decodeKargsArea(b []byte, pad, end byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: karg area is not UTF-8", ErrMalformed)
	}
	b = bytes.TrimRight(b, string([]byte{pad}))
	b = bytes.TrimRight(b, string([]byte{end}))
	return string(bytes.TrimSpace(b)), nil
}

// encodeKargsArea formats args for one area.
func encodeKargsArea(args string, size int, pad, end byte) ([]byte, error) {
	if len(args)+1 > size {
		return nil, fmt.Errorf("%w: kernel arguments are %d bytes, the areas hold %d", ErrTooLarge, len(args)+1, size)
	}
	b := bytes.Repeat([]byte{pad}, size)
	copy(b, args)
	b[len(args)] = end
	return b, nil
}

// currentKargs reads every area and checks they agree.
func currentKargs(name string, r io.ReaderAt, kl *KargsLayout) (string, error) {
	var first string
	buf := make([]byte, kl.Size)
	for i, a := range kl.Areas {
		if _, err := r.ReadAt(buf, a.Offset); err != nil {
			return "", fmt.Errorf("%s: reading karg area at %d: %w", name, a.Offset, err)
		}
		s, err := decodeKargsArea(buf, a.Pad, a.End)
		if err != nil {
			return "", fmt.Errorf("%s: karg area at %d: %w", name, a.Offset, err)
		}
		if i == 0 {
			first = s
		} else if s != first {
			return "", fmt.Errorf("%s: %w: karg areas disagree: %q at %d vs %q at %d", name, ErrMalformed, first, kl.Areas[0].Offset, s, a.Offset)
		}
	}
	return first, nil
}
