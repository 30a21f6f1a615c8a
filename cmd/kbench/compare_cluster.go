package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// clusterTarget is the name compare gives the cluster-mode kproxy.
const clusterTarget = "kproxy+cluster"

// clusterConfig is the kproxy.yaml of compare's cluster-mode kproxy: one
// node port, for the null broker's node id, so that the load reaches the
// broker the way a cluster client's Produce and Fetch do.
func clusterConfig(nodePort int, node int32) string {
	return fmt.Sprintf("cluster:\n  node_port_base: %d\n  node_ids: {min: %d, max: %d}\n", nodePort, node, node)
}

// startClustered starts kproxy in cluster mode with broker as its
// bootstrap, and returns it with the address of its node port for node,
// once a request through that port has been answered (kproxy has learnt
// the broker through the bootstrap and paired the port with it).
func startClustered(bin, broker string, node int32, extra []string) (*kproxyChild, string, error) {
	nodeAddr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	_, p, _ := net.SplitHostPort(nodeAddr)
	port, _ := strconv.Atoi(p)
	dir, err := os.MkdirTemp("", "kbench-cluster-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir) // kproxy has read it by the time it listens
	path := filepath.Join(dir, "kproxy.yaml")
	if err := os.WriteFile(path, []byte(clusterConfig(port, node)), 0o600); err != nil {
		return nil, "", err
	}
	k, err := startKproxy(bin, broker, append([]string{"--config", path}, extra...))
	if err != nil {
		return nil, "", err
	}
	if err := askVersions(nodeAddr); err != nil {
		k.stop()
		return nil, "", fmt.Errorf("cluster-mode kproxy, node %d's port %s: %w (is the broker's node id within cluster.node_ids?)", node, nodeAddr, err)
	}
	return k, nodeAddr, nil
}

// askVersions sends one ApiVersions v0 to addr and reads its answer.
func askVersions(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(requestFrame(req, 1, "kbench")); err != nil {
		return err
	}
	var buf []byte
	frame, err := readFrame(bufio.NewReader(c), &buf)
	if err != nil {
		return fmt.Errorf("no ApiVersions answer: %w", err)
	}
	h, err := framing.ParseResponseHeader(frame, framing.KeyApiVersions, 0)
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(frame[h.BodyOffset:]); err != nil || resp.ErrorCode != 0 {
		return fmt.Errorf("bad ApiVersions answer (error code %d): %v", resp.ErrorCode, err)
	}
	return nil
}

// roundFig is one target's figures in one round of compare.
type roundFig struct {
	reqPerSec float64
	cpuPerReq time.Duration // 0 when the target's CPU is not measured
}

// ratioSpread is the median, min and max of per-round ratios a/b.
type ratioSpread struct{ median, min, max float64 }

func (s ratioSpread) String() string {
	return fmt.Sprintf("median %.1f%% (rounds %.1f%%-%.1f%%)", 100*s.median, 100*s.min, 100*s.max)
}

// spread of ratios over rounds; ok is false when there are none.
func spread(ratios []float64) (ratioSpread, bool) {
	if len(ratios) == 0 {
		return ratioSpread{}, false
	}
	s := slices.Clone(ratios)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return ratioSpread{median: m, min: s[0], max: s[len(s)-1]}, true
}

// roundRatios is a's req/s and CPU per request over b's, round by round
// (rounds where b has no figure are left out).
func roundRatios(a, b row) (rps, cpu []float64) {
	for i := range min(len(a.rounds), len(b.rounds)) {
		ra, rb := a.rounds[i], b.rounds[i]
		if rb.reqPerSec > 0 {
			rps = append(rps, ra.reqPerSec/rb.reqPerSec)
		}
		if ra.cpuPerReq > 0 && rb.cpuPerReq > 0 {
			cpu = append(cpu, float64(ra.cpuPerReq)/float64(rb.cpuPerReq))
		}
	}
	return rps, cpu
}

// printRoundRatios compares target a with target b round by round (they
// ran back to back in each round, so a noisy moment falls on both alike):
// the median and spread of a's req/s and CPU per request over b's.
func printRoundRatios(w io.Writer, a, b row) {
	rps, cpu := roundRatios(a, b)
	if s, ok := spread(rps); ok {
		fmt.Fprintf(w, "%s / %s, per round: req/s %v\n", a.name, b.name, s)
	}
	if s, ok := spread(cpu); ok {
		fmt.Fprintf(w, "%s / %s, per round: CPU/req %v\n", a.name, b.name, s)
	}
}

// medianCI is a distribution-free confidence interval of at least 95% for
// the median of the population the ratios were drawn from: the order
// statistics x(j) and x(n+1-j) with the largest j for which a
// Binomial(n, 1/2) count falls below j with probability at most 2.5%. ok
// is false with fewer than 6 ratios, too few for such an interval.
func medianCI(ratios []float64) (lo, hi float64, ok bool) {
	n := len(ratios)
	if n < 6 {
		return 0, 0, false
	}
	s := slices.Clone(ratios)
	slices.Sort(s)
	// below is P(count < j), built up term by term (term is P(count = i),
	// C(n, i) / 2^n).
	j, below, term := 1, 0.0, math.Pow(0.5, float64(n))
	for i := 0; ; i++ {
		if below+term > 0.025 {
			break
		}
		below += term
		term = term * float64(n-i) / float64(i+1)
		j = i + 1 // below is now P(count < i+1)
	}
	return s[j-1], s[n-j], true
}

// printMedianCI prints, for a against b round by round, the 95%
// confidence interval of the median per-round ratio of req/s and of CPU
// per request: the resolution of the run, which its medians alone do not
// show. Many short rounds narrow it more than a few long ones.
func printMedianCI(w io.Writer, a, b row) {
	rps, cpu := roundRatios(a, b)
	for _, m := range []struct {
		what string
		r    []float64
	}{{"req/s", rps}, {"CPU/req", cpu}} {
		if lo, hi, ok := medianCI(m.r); ok {
			fmt.Fprintf(w, "%s / %s, per round: %s median's 95%% confidence interval %.1f%%-%.1f%% (%d rounds)\n",
				a.name, b.name, m.what, 100*lo, 100*hi, len(m.r))
		} else if len(m.r) > 0 {
			fmt.Fprintf(w, "%s / %s, per round: %s: %d rounds, too few for a confidence interval of the median (6 or more)\n",
				a.name, b.name, m.what, len(m.r))
		}
	}
}
