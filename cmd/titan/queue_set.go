package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueueSetCmd is `titan queue set DEST [--group G] --ring-size N`: POST
// admin.PathQueuesRingSize.
func newQueueSetCmd(g *globalOptions) *cobra.Command {
	var (
		group    string
		ringSize int
	)
	cmd := &cobra.Command{
		Use:   "set DESTINATION --ring-size N",
		Short: "Change a queue's settings at run time (ring size)",
		Long: `Change settings of the existing queue of DESTINATION in --group.

--ring-size N makes a /queue/... destination a ring of N messages (-1: no limit).
Lowering it removes nothing at once; the queue stops growing and drops from its head
as new messages arrive.`,
		Example: "  titan queue set /queue/jobs --ring-size 1000",
		Args:    oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("ring-size") {
				return errors.New("nothing to set: pass --ring-size N")
			}
			q := url.Values{}
			q.Set(admin.ParamSize, strconv.Itoa(ringSize))
			var qi admin.QueueInfo
			err := queueCall(cmd, g, http.MethodPost, admin.PathQueuesRingSize, args[0], group, q, &qi)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, qi)
			}
			_, err = fmt.Fprintf(out, "queue %s: ring size %s (%d messages held)\n", where(qi.Destination, qi.Group), limitCount(qi.RingSize), qi.Size)
			return err
		},
	}
	addGroupFlag(cmd, &group)
	cmd.Flags().IntVar(&ringSize, "ring-size", 0, "ring size in messages (-1: no limit)")
	return cmd
}
