package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/titan-broker/titan/internal/admin"
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// styler colours text with ANSI codes, or not at all.
type styler struct{ on bool }

// newStyler colours only a terminal, and never with --no-color or NO_COLOR set.
func newStyler(g *globalOptions, w io.Writer) styler {
	return styler{on: !g.noColor && os.Getenv("NO_COLOR") == "" && isTerminal(w)}
}

func (s styler) wrap(code, text string) string {
	if !s.on {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (s styler) bold(t string) string   { return s.wrap("1", t) }
func (s styler) dim(t string) string    { return s.wrap("2", t) }
func (s styler) yellow(t string) string { return s.wrap("33", t) }
func (s styler) green(t string) string  { return s.wrap("32", t) }

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table collects rows and writes them as aligned columns, two spaces apart. Widths are
// computed on the plain text and styles applied afterwards, so colour never breaks the
// alignment. The header is bold.
type table struct {
	w      io.Writer
	st     styler
	header []string
	rows   [][]cell
}

// cell is one table cell: its text and an optional style.
type cell struct {
	text  string
	style func(string) string
}

func newTable(w io.Writer, st styler, header ...string) *table {
	return &table{w: w, st: st, header: header}
}

// row adds a row of unstyled cells.
func (t *table) row(cells ...string) {
	r := make([]cell, len(cells))
	for i, c := range cells {
		r[i] = cell{text: c}
	}
	t.rows = append(t.rows, r)
}

// styledRow adds a row of cells that may carry styles.
func (t *table) styledRow(cs ...cell) { t.rows = append(t.rows, cs) }

func (t *table) flush() error {
	width := make([]int, len(t.header))
	for i, h := range t.header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c.text))
			}
		}
	}
	var b strings.Builder
	line := func(cells []cell) {
		for i, c := range cells {
			text := c.text
			if i < len(cells)-1 && i < len(width) {
				text += strings.Repeat(" ", width[i]-utf8.RuneCountInString(c.text)+2)
			}
			if c.style != nil {
				// Style the text only, not its padding.
				pad := len(text) - len(c.text)
				text = c.style(c.text) + strings.Repeat(" ", pad)
			}
			b.WriteString(text)
		}
		b.WriteByte('\n')
	}
	hdr := make([]cell, len(t.header))
	for i, h := range t.header {
		hdr[i] = cell{text: h, style: t.st.bold}
	}
	line(hdr)
	for _, r := range t.rows {
		line(r)
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// formatBytes renders n bytes as "512 B", "1 MiB", "1.5 GiB".
func formatBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}

// limitBytes renders a byte limit, "none" for 0 or less.
func limitBytes(n int64) string {
	if n <= 0 {
		return "none"
	}
	return formatBytes(n)
}

// limitCount renders a count limit, "none" for 0 or less.
func limitCount(n int) string {
	if n <= 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

// queueState renders paused/active.
func queueState(st styler, q admin.QueueInfo) cell {
	if q.Paused {
		return cell{text: "paused", style: st.yellow}
	}
	return cell{text: "active", style: st.green}
}

// writeQueueTable writes the full queue table, then the "N queues in M groups" line.
func writeQueueTable(w io.Writer, st styler, qs []admin.QueueInfo, sum admin.Summary) error {
	if len(qs) == 0 {
		fmt.Fprintln(w, "No queues.")
	} else {
		t := newTable(w, st, "GROUP", "DESTINATION", "PATTERN", "SIZE", "PENDING", "CAPACITY", "MAX PENDING", "RING", "CONSUMERS", "DELIVERING", "ENQUEUED", "DISPATCHED", "DROPPED", "STATE")
		for _, q := range qs {
			t.styledRow(append(cells(q.Group, q.Destination, q.Pattern, strconv.Itoa(q.Size), formatBytes(q.PendingBytes),
				limitCount(q.Capacity), limitBytes(q.MaxPendingBytes), limitCount(q.RingSize),
				strconv.Itoa(q.Consumers), strconv.Itoa(q.Delivering), u64(q.Enqueued), u64(q.Dispatched), u64(q.Dropped),
			), queueState(st, q))...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, sum.Text)
	return err
}

// cells makes unstyled cells of texts followed by more (styled) cells.
func cells(texts ...string) []cell {
	out := make([]cell, len(texts))
	for i, t := range texts {
		out[i] = cell{text: t}
	}
	return out
}

// where renders "/orders (group default)" for messages.
func where(destination, group string) string {
	if group == "" {
		group = "default"
	}
	return destination + " (group " + group + ")"
}
