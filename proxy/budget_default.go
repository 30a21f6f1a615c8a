package proxy

import (
	"bufio"
	"bytes"
	"io/fs"
	"strconv"
	"strings"
)

// fallbackBufferedBytes is max_buffered_bytes where no container memory
// limit is found: 1 GiB, room for ten maximum-size frames at the
// defaults, on machines that are not told how much memory they have.
const fallbackBufferedBytes = 1 << 30

// defaultMaxBufferedBytes is max_buffered_bytes when the configuration
// leaves it 0: half the container's memory limit (cgroup v2 memory.max)
// where there is one, else fallbackBufferedBytes. Half leaves the other
// half for what the budget does not count: the Go heap and runtime,
// output buffers and per-connection state.
func defaultMaxBufferedBytes(root fs.FS) (int, string) {
	if limit, ok := memoryMax(root); ok {
		return int(limit / 2), "half of cgroup memory.max"
	}
	return fallbackBufferedBytes, "fixed default (no cgroup v2 memory limit)"
}

// memoryMax reads the memory limit of the cgroup v2 kproxy runs in: the
// one /proc/self/cgroup names, else the root of /sys/fs/cgroup (what a
// container with its own cgroup namespace sees). "max" means no limit.
func memoryMax(root fs.FS) (int64, bool) {
	dirs := []string{"sys/fs/cgroup"}
	if b, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if path, ok := strings.CutPrefix(sc.Text(), "0::/"); ok && path != "" {
				dirs = append([]string{"sys/fs/cgroup/" + path}, dirs...)
			}
		}
	}
	for _, d := range dirs {
		b, err := fs.ReadFile(root, d+"/memory.max")
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
