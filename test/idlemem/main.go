// Command idlemem measures the memory a titan process holds per idle STOMP connection.
//
// It starts the given titan binary (memory store, one STOMP server and the monitor on free
// loopback ports), reads /metrics, opens -conns TCP connections that each complete a
// CONNECT (STOMP 1.2, the heart-beat header of -heart-beat) and then stay idle, waits
// -settle, reads /metrics again, and prints per connection the growth of the process's
// resident set (process_resident_memory_bytes), of the Go heap in use
// (go_memstats_heap_inuse_bytes), of goroutine stacks (go_memstats_stack_inuse_bytes) and of
// the goroutine count. It closes every connection and stops titan before it exits.
//
// Usage (scripts/idle-memory builds titan and runs this):
//
//	go run ./test/idlemem -titan ./bin/titan -conns 10000
//
// The client side needs one file descriptor per connection, and so does titan: Go raises the
// soft RLIMIT_NOFILE to the hard limit at start, so the hard limit must exceed -conns.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	titan := flag.String("titan", "titan", "the titan binary to measure")
	conns := flag.Int("conns", 10000, "idle STOMP connections to open")
	heartBeat := flag.String("heart-beat", "10000,10000", "the heart-beat header each CONNECT sends")
	clusterMode := flag.Bool("cluster", false, "measure a cluster node: titan runs in cluster mode (one embedded node, replicas 1, its own route as the seed)")
	settle := flag.Duration("settle", 15*time.Second, "how long to wait, idle, before the second reading (past the broker's 10 s idle decay, gctune)")
	flag.Parse()
	if err := run(*titan, *conns, *heartBeat, *settle, *clusterMode); err != nil {
		fmt.Fprintln(os.Stderr, "idlemem:", err)
		os.Exit(1)
	}
}

var readyLine = regexp.MustCompile(`ready: STOMP (\S+?)(?:,|\s).*monitor (\S+),`)

func run(titan string, n int, heartBeat string, settle time.Duration, clusterMode bool) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(n)+100 {
		return fmt.Errorf("RLIMIT_NOFILE is %d; %d connections need more (raise ulimit -n)", lim.Cur, n)
	}
	dir, err := os.MkdirTemp("", "idlemem")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "titan.yml")
	yaml := `titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0}
  monitor: {host: 127.0.0.1, port: 0}
  limits: {max-connections-per-address: -1}  # every connection comes from 127.0.0.1
  store: {type: memory}
  log: {level: warn}
`
	if clusterMode {
		// A three-node cluster on loopback: the measured node and two peers (its quorum),
		// all of this binary; only the first is measured.
		var ports []int
		for range 3 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			ports = append(ports, l.Addr().(*net.TCPAddr).Port)
			_ = l.Close()
		}
		routes := fmt.Sprintf(`["nats://127.0.0.1:%d", "nats://127.0.0.1:%d", "nats://127.0.0.1:%d"]`, ports[0], ports[1], ports[2])
		section := func(i int) string {
			return fmt.Sprintf("  cluster: {name: idlemem, node-name: n%d, listen: 127.0.0.1:%d, routes: %s, store-dir: %q}\n",
				i, ports[i], routes, filepath.Join(dir, fmt.Sprint("js", i)))
		}
		yaml += section(0)
		for i := 1; i < 3; i++ {
			peerCfg := filepath.Join(dir, fmt.Sprint("peer", i, ".yml"))
			peer := "titan:\n  servers:\n    - {name: stomp, host: 127.0.0.1, port: 0}\n  monitor: {host: 127.0.0.1, port: 0}\n  store: {type: memory}\n  log: {level: error}\n" + section(i)
			if err := os.WriteFile(peerCfg, []byte(peer), 0o644); err != nil {
				return err
			}
			pc := exec.Command(titan, "serve", "--config", peerCfg)
			pc.Dir = dir
			if err := pc.Start(); err != nil {
				return err
			}
			defer func() {
				_ = pc.Process.Signal(syscall.SIGTERM)
				_ = pc.Wait()
			}()
		}
	}
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(titan, "serve", "--config", cfg)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	sc := bufio.NewScanner(out)
	var stompAddr, monitor string
	for sc.Scan() {
		if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
			stompAddr, monitor = m[1], m[2]
			break
		}
	}
	if stompAddr == "" {
		return fmt.Errorf("titan printed no ready line")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()

	time.Sleep(time.Second) // let start-up garbage settle before the first reading
	before, err := readMetrics(monitor)
	if err != nil {
		return err
	}
	start := time.Now()
	cs := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}()
	connect := []byte("CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:" + heartBeat + "\n\n\x00")
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := dialConnected(stompAddr, connect)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			cs = append(cs, c)
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("after %d connections: %w", len(cs), firstErr)
	}
	// Keep the client side's heart-beats flowing so titan never times the connections out,
	// spread over the interval as independent clients' would be: every 50 ms a slice of the
	// connections sends one, each connection once per half interval.
	stop := make(chan struct{})
	defer close(stop)
	if cx, _, _ := strings.Cut(heartBeat, ","); cx != "0" {
		ms, _ := strconv.Atoi(cx)
		const tick = 50 * time.Millisecond
		slices := max(int(time.Duration(ms)*time.Millisecond/2/tick), 1)
		go func() {
			t := time.NewTicker(tick)
			defer t.Stop()
			for k := 0; ; k = (k + 1) % slices {
				select {
				case <-stop:
					return
				case <-t.C:
					for i := k; i < len(cs); i += slices {
						_, _ = cs[i].Write([]byte{'\n'})
					}
				}
			}
		}()
	}
	fmt.Printf("opened %d STOMP connections (heart-beat %s) in %v\n", len(cs), heartBeat, time.Since(start).Round(time.Millisecond))
	time.Sleep(settle)
	after, err := readMetrics(monitor)
	if err != nil {
		return err
	}
	per := func(name string) float64 { return (after[name] - before[name]) / float64(len(cs)) }
	fmt.Printf("connections reported by titan: %.0f\n", after["titan_connections"])
	fmt.Printf("per idle connection: RSS %.0f B, heap in use %.0f B, stacks %.0f B, goroutines %.2f\n",
		per("process_resident_memory_bytes"), per("go_memstats_heap_inuse_bytes"),
		per("go_memstats_stack_inuse_bytes"), per("go_goroutines"))
	fmt.Printf("total RSS %.1f MiB (was %.1f MiB)\n", after["process_resident_memory_bytes"]/(1<<20), before["process_resident_memory_bytes"]/(1<<20))
	return nil
}

// dialConnected opens one connection, sends CONNECT and reads through the CONNECTED frame.
func dialConnected(addr string, connect []byte) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(connect); err != nil {
		_ = c.Close()
		return nil, err
	}
	var got []byte
	buf := make([]byte, 512)
	for !bytes.Contains(got, []byte{0}) {
		k, err := c.Read(buf)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		got = append(got, buf[:k]...)
	}
	if !bytes.HasPrefix(got, []byte("CONNECTED\n")) {
		_ = c.Close()
		return nil, fmt.Errorf("CONNECT answered with %q", got)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// readMetrics returns the unlabelled samples of the monitor's /metrics (labelled series
// are summed under their name).
func readMetrics(monitor string) (map[string]float64, error) {
	resp, err := http.Get("http://" + monitor + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[name] += v
	}
	return m, sc.Err()
}
