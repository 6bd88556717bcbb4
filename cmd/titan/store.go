package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// errStoreCheckFailed is returned by `titan store check` when the store would refuse to
// start or fails its consistency check (exit status 1 after the report).
var errStoreCheckFailed = errors.New("store check failed")

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Inspect the embedded store's data directory (offline)",
	}
	cmd.AddCommand(newStoreCheckCmd())
	return cmd
}

func newStoreCheckCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report what recovery finds in a data directory, without writing to it",
		Long: `Open the store in --data-dir read-only (stop the broker first: the directory is
locked while it runs), replay its write-ahead log in memory and report what recovery finds:
the log's size, the records it replays, a torn or cut tail and how much of it is discarded,
the committed mark the store had recorded against the one recovered, the streams and
records held, and the result of a full consistency check.

When committed records are missing (the log was cut or lost after its fsync), 'titan serve'
refuses to start. Restore the directory from a backup, or start once with
'titan serve --accept-data-loss' to go on with what remains (the loss is logged and the next
start is clean). Exit status 1 when the store would refuse to start or the check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := pebblestore.Inspect(dataDir, pebblestore.Options{})
			if err != nil {
				return err
			}
			r := rep.Recovery
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "data directory   %s\n", dataDir)
			if r.WAL != "" {
				fmt.Fprintf(w, "write-ahead log  %s: %d bytes, %d records replayed (%d bytes), clean close: %v\n",
					r.WAL, r.WALBytes, r.Records, r.ReplayedBytes, r.CleanClose)
				fmt.Fprintf(w, "torn/cut tail    %d bytes discarded\n", r.DiscardedBytes)
			}
			fmt.Fprintf(w, "committed mark   recorded %d, recovered %d\n", r.CommittedMark, r.RecoveredMark)
			fmt.Fprintf(w, "streams          %d holding %d records, %d bytes\n", rep.Streams, rep.Records, rep.Bytes)
			failed := false
			if r.MissingRecords > 0 {
				failed = true
				fmt.Fprintf(w, "DATA LOSS        %d committed records are missing: 'titan serve' refuses to start.\n"+
					"                 Restore the directory from a backup, or start with --accept-data-loss to continue with what remains.\n",
					r.MissingRecords)
			}
			if rep.Problems != nil {
				failed = true
				fmt.Fprintf(w, "CHECK FAILED     %v\n", rep.Problems)
			}
			if failed {
				return errStoreCheckFailed
			}
			fmt.Fprintln(w, "OK               the store is consistent and holds everything it committed")
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./data", "store directory")
	return cmd
}
