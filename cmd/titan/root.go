package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "titan",
		Short:         "Titan is a STOMP message broker",
		Long:          "Titan is a STOMP 1.0/1.1/1.2 message broker.\n\nRun `titan serve` to start a broker; the other commands operate a running broker over its monitor API.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd())
	return root
}
