package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// banner writes titan serve's own lines: the ready line and the shutdown line on stdout,
// and a failure on stderr. With JSON logging (or -o json) each is one JSON object in
// log/slog's shape ({"time","level","msg",...}), so every line titan serve prints is JSON;
// otherwise they are the plain text lines scripts and the e2e tests read
// ("Titan 0.1.0 ready: STOMP a, b, monitor m, store s"). The version is the binary's, as
// titan version prints it.
type banner struct {
	json   bool
	out    io.Writer
	outLog *slog.Logger // JSON to out; nil in text mode
	errLog *slog.Logger // JSON to stderr; nil in text mode
}

// errReported is returned by serve after banner.fail logged the error itself, so execute
// prints nothing more.
var errReported = errors.New("error already reported")

func newBanner(cmd *cobra.Command, json bool) *banner {
	b := &banner{json: json, out: cmd.OutOrStdout()}
	if json {
		b.outLog = slog.New(slog.NewJSONHandler(b.out, nil))
		b.errLog = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
	}
	return b
}

// serveWantsJSON reports whether JSON output was asked for by flag or environment, for errors
// that happen before the configuration is known.
func serveWantsJSON(cmd *cobra.Command, f *serveFlags) bool {
	if o := cmd.Flag("output"); o != nil && o.Value.String() == outputJSON {
		return true
	}
	if cmd.Flags().Changed("log-format") {
		return f.logFormat == "json"
	}
	return os.Getenv("TITAN_LOG_FORMAT") == "json"
}

func (b *banner) ready(stomp []string, monitor, store string) {
	if b.json {
		b.outLog.Info("ready", "version", readBuildInfo().Version, "stomp", stomp, "monitor", monitor, "store", store)
		return
	}
	fmt.Fprintf(b.out, "Titan %s ready: STOMP %s, monitor %s, store %s\n", readBuildInfo().Version, strings.Join(stomp, ", "), monitor, store)
}

func (b *banner) stopping() {
	if b.json {
		b.outLog.Info("shutting down")
		return
	}
	fmt.Fprintln(b.out, "Titan shutting down")
}

// fail logs err as JSON in JSON mode and returns errReported; in text mode it returns err
// for execute to print.
func (b *banner) fail(err error) error {
	if err == nil || !b.json {
		return err
	}
	b.errLog.Error("titan serve failed", "err", err.Error())
	return errReported
}
