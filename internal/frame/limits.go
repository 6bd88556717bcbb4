package frame

import "sync/atomic"

// Limits bounds what a Parser accepts before it allocates. Zero fields take the defaults of
// DefaultLimits; negative values are invalid.
type Limits struct {
	// MaxHeaderLineBytes bounds one command or header line, EOL excluded (default 10240, the
	// max-header-length of Titan's protocol-options).
	MaxHeaderLineBytes int
	// MaxHeaders bounds the number of headers in one frame (default 1000).
	MaxHeaders int
	// MaxHeaderBytes bounds the header section of one frame: the command line, every header
	// line and the blank line that ends them, EOLs included (default 256 KiB).
	MaxHeaderBytes int
	// MaxBodyBytes bounds one frame's body (default 16 MiB).
	MaxBodyBytes int
	// LargeFrames, when not nil, bounds the bytes that every parser sharing it holds in read
	// buffers grown past 64 KiB for a frame in progress: a frame that would take more gets
	// ErrLargeFrameBudget (fatal) instead of memory. Without it, connections that each
	// start a maximal frame and never finish it hold MaxBodyBytes each.
	LargeFrames *Budget
}

// Budget is a broker-wide bound in bytes shared by parsers (Limits.LargeFrames). Safe for
// concurrent use.
type Budget struct {
	max     int64
	used    atomic.Int64
	refused atomic.Uint64
}

// NewBudget returns a budget of max bytes (max <= 0: nil, no bound).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		return nil
	}
	return &Budget{max: max}
}

// Used returns the bytes reserved now; Max the bound.
func (b *Budget) Used() int64 { return b.used.Load() }

// Refused returns how many frames were refused for want of budget.
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// Max returns the budget's bound in bytes.
func (b *Budget) Max() int64 { return b.max }

func (b *Budget) reserve(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		b.refused.Add(1)
		return false
	}
	return true
}

func (b *Budget) release(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// Default limit values; see Limits.
const (
	DefaultMaxHeaderLineBytes = 10240
	DefaultMaxHeaders         = 1000
	DefaultMaxHeaderBytes     = 256 << 10
	DefaultMaxBodyBytes       = 16 << 20
)

// DefaultLimits returns the limits Titan ships with.
func DefaultLimits() Limits {
	return Limits{
		MaxHeaderLineBytes: DefaultMaxHeaderLineBytes,
		MaxHeaders:         DefaultMaxHeaders,
		MaxHeaderBytes:     DefaultMaxHeaderBytes,
		MaxBodyBytes:       DefaultMaxBodyBytes,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxHeaderLineBytes <= 0 {
		l.MaxHeaderLineBytes = d.MaxHeaderLineBytes
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = d.MaxHeaders
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	return l
}
