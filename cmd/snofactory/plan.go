package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/spf13/cobra"
)

func newPlanCommand() *cobra.Command {
	var f buildFlags
	var output string
	c := &cobra.Command{
		Use:   "plan FILE",
		Short: "Show the stage graph, its keys, and which stages a build would run and why",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return badInput(fmt.Errorf("--output %q: want text or json", output))
			}
			_, g, secrets, err := loadGraph(args[0], graphFlags{})
			if err != nil {
				return err
			}
			cache, err := f.cache()
			if err != nil {
				return err
			}
			plan, err := pipeline.Plan(cmd.Context(), g, cache, secrets, pipeline.Selection{Until: f.until, Force: f.force})
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Blueprint string                  `json:"blueprint"`
					Stages    []pipeline.PlannedStage `json:"stages"`
				}{g.Blueprint, plan})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STAGE\tKEY\tACTION\tSESSION\tWHY")
			for _, s := range plan {
				key := s.Key
				switch {
				case len(key) > 12:
					key = key[:12]
				case key == "":
					key = "-" // chains on outputs of a stage that has not run yet
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, key, s.Action, cmp.Or(s.Session, "-"), strings.Join(s.Reasons, "; "))
			}
			return tw.Flush()
		},
	}
	f.register(c, false)
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return c
}
