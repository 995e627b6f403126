package main

import (
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
			if err := textOrJSON("--output", output); err != nil {
				return err
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
				return writeJSON(cmd.OutOrStdout(), struct {
					Blueprint string                  `json:"blueprint"`
					Stages    []pipeline.PlannedStage `json:"stages"`
				}{g.Blueprint, plan})
			}
			return pipeline.WritePlan(cmd.OutOrStdout(), plan)
		},
	}
	f.register(c, false)
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return c
}
