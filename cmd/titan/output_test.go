package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1 << 20: "1 MiB", 64 << 20: "64 MiB", 3 << 30: "3 GiB"} {
		requireEqual(t, formatBytes(n), want, "formatBytes")
	}
}

func TestColouredTableStaysAligned(t *testing.T) {
	var plain, coloured bytes.Buffer
	for _, tc := range []struct {
		buf *bytes.Buffer
		st  styler
	}{{&plain, styler{}}, {&coloured, styler{on: true}}} {
		tb := newTable(tc.buf, tc.st, "A", "STATE", "B")
		tb.styledRow(cell{text: "x"}, cell{text: "paused", style: tc.st.yellow}, cell{text: "1"})
		tb.styledRow(cell{text: "longer"}, cell{text: "active", style: tc.st.green}, cell{text: "22"})
		if err := tb.flush(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(coloured.String(), "\x1b[33mpaused\x1b[0m") {
		t.Fatalf("no colour: %q", coloured.String())
	}
	stripped := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(coloured.String(), "")
	requireEqual(t, stripped, plain.String(), "coloured table without codes")
	requireEqual(t, plain.String(), "A       STATE   B\nx       paused  1\nlonger  active  22\n", "plain table")
}
