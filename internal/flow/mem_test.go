package flow

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestAvailableMemory: the cgroup limit when set and below physical memory, else MemTotal;
// 0 when nothing can be read. HeapLimit(0) without GOMEMLIMIT is half of it, and -1 is off.
func TestAvailableMemory(t *testing.T) {
	const meminfo = "MemTotal:       16384000 kB\nMemFree:         1000 kB\n"
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if v, ok := m[p]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	cases := []struct {
		name  string
		files map[string]string
		want  uint64
	}{
		{"meminfo only", map[string]string{"/proc/meminfo": meminfo}, 16384000 << 10},
		{"cgroup v2 unlimited", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 16384000 << 10},
		{"cgroup v2 limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30},
		{"cgroup v1 limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30},
		{"cgroup v1 above memory", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 16384000 << 10},
		{"nothing", map[string]string{}, 0},
	}
	for _, c := range cases {
		if got := AvailableMemory(files(c.files)); got != c.want {
			t.Errorf("%s: AvailableMemory = %d, want %d", c.name, got, c.want)
		}
	}
	if got := AvailableMemory(func(string) ([]byte, error) { return nil, errors.New("no") }); got != 0 {
		t.Errorf("unreadable: %d", got)
	}
	if HeapLimit(-1) != 0 || HeapLimit(1234) != 1234 {
		t.Errorf("HeapLimit(-1) = %d, HeapLimit(1234) = %d", HeapLimit(-1), HeapLimit(1234))
	}
	if got, want := HeapLimit(0), AvailableMemory(os.ReadFile)/2; os.Getenv("GOMEMLIMIT") == "" && want > 0 && got != want {
		t.Errorf("HeapLimit(0) = %d, want half the available memory %d (GOMEMLIMIT unset in tests)", got, want)
	}
}
