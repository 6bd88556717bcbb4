package lockorder

import (
	"sync"
	"testing"
)

// BenchmarkMutex is an uncontended Lock/Unlock of a ranked Mutex; compare with
// BenchmarkSyncMutex (equal without the invariants tag, where Mutex is sync.Mutex).
func BenchmarkMutex(b *testing.B) {
	b.ReportAllocs()
	var m Mutex[ConnRank]
	n := 0
	for b.Loop() {
		m.Lock()
		n++
		m.Unlock()
	}
	_ = n
}

// BenchmarkSyncMutex is the baseline: an uncontended sync.Mutex Lock/Unlock.
func BenchmarkSyncMutex(b *testing.B) {
	b.ReportAllocs()
	var m sync.Mutex
	n := 0
	for b.Loop() {
		m.Lock()
		n++
		m.Unlock()
	}
	_ = n
}
