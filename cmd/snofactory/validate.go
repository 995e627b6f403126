package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/blueprints"
)

func newValidateCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check blueprints and report every problem in them",
		Long: `Validate reads each blueprint, applies defaults and checks it, including the files it
references. Every problem is printed on stderr as FILE:LINE:COL: PATH: MESSAGE (with a hint
where one helps); each good file prints "FILE: ok" on stdout. The exit code is 2 if any
file is invalid.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput(errors.New("validate: name at least one blueprint file"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case "text", "json":
			default:
				return badInput(fmt.Errorf("validate: --format must be text or json, got %q", format))
			}
			return runValidate(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, format == "json")
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, or json (one report for all files, on stdout)")
	return cmd
}

func runValidate(stdout, stderr io.Writer, files []string, asJSON bool) error {
	bad := 0
	var reports []blueprints.FileReport
	for _, f := range files {
		r, err := blueprints.CheckFile(f)
		if err != nil {
			return fmt.Errorf("validating %s: %w", f, err)
		}
		reports = append(reports, r)
		if !r.OK {
			bad++
		}
		if !asJSON {
			r.WriteText(stdout, stderr)
		}
	}
	if asJSON {
		if err := writeJSON(stdout, reports); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	if bad > 0 {
		return badInput(fmt.Errorf("%d of %d blueprints invalid", bad, len(files)))
	}
	return nil
}

func newSchemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of blueprints",
		Long: `Schema prints the JSON Schema (draft 2020-12) of the current blueprint version, generated
from its Go types. Editors use it through yaml-language-server: put
"# yaml-language-server: $schema=PATH/schema.json" at the top of a blueprint.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return badInput(errors.New("schema takes no arguments"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := cmd.OutOrStdout().Write(blueprints.Schema()); err != nil {
				return fmt.Errorf("writing the schema: %w", err)
			}
			return nil
		},
	}
}
