package siteconfig

import (
	"errors"
	"fmt"
	"io"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// Reported prints every problem of the invalid site config at path on stderr, one a
// line, and makes err the user's input (badinput: exit 2); other errors pass unchanged.
func Reported(stderr io.Writer, path string, err error) error {
	var ve *strictyaml.ValidationErrors
	if errors.As(err, &ve) {
		fmt.Fprintln(stderr, ve.Error())
		return badinput.Wrap(fmt.Errorf("site config %s is invalid", path))
	}
	return err
}

// LoadReported is Load with its problems, all of them, printed on stderr as Reported does.
func LoadReported(stderr io.Writer, path string) (*SiteConfig, error) {
	sc, err := Load(path)
	if err != nil {
		return nil, Reported(stderr, path, fmt.Errorf("loading the site config %s: %w", path, err))
	}
	return sc, nil
}
