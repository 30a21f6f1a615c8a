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
// leaves it 0: half the container's memory limit (cgroup v2 memory.max,
// or cgroup v1 memory.limit_in_bytes on nodes that still run v1) where
// there is one, else fallbackBufferedBytes. Half leaves the other half
// for what the budget does not count: the Go heap and runtime, output
// buffers and per-connection state.
func defaultMaxBufferedBytes(root fs.FS) (int, string) {
	if limit, source, ok := memoryLimit(root); ok {
		return int(limit / 2), "half of cgroup " + source
	}
	return fallbackBufferedBytes, "fixed default (no cgroup memory limit)"
}

// v1Unlimited is where a cgroup v1 memory.limit_in_bytes means no limit:
// v1 writes "no limit" as the largest page-aligned int64.
const v1Unlimited = 1 << 60

// memoryLimit reads the memory limit of the cgroup kproxy runs in and
// names the file it came from. cgroup v2 first: memory.max of the cgroup
// /proc/self/cgroup names ("0::/path"), else of the root of
// /sys/fs/cgroup (what a container with its own cgroup namespace sees);
// "max" is no limit. Then cgroup v1: memory.limit_in_bytes of the memory
// controller's cgroup ("N:memory:/path"), else of its hierarchy's root.
func memoryLimit(root fs.FS) (int64, string, bool) {
	v2 := []string{"sys/fs/cgroup"}
	v1 := []string{"sys/fs/cgroup/memory"}
	if b, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), ":", 3)
			if len(f) != 3 || f[2] == "/" || f[2] == "" {
				continue
			}
			switch {
			case f[0] == "0" && f[1] == "":
				v2 = append([]string{"sys/fs/cgroup" + f[2]}, v2...)
			case hasController(f[1], "memory"):
				v1 = append([]string{"sys/fs/cgroup/memory" + f[2]}, v1...)
			}
		}
	}
	for _, d := range v2 {
		if b, err := fs.ReadFile(root, d+"/memory.max"); err == nil {
			n, ok := parseLimit(b, "max")
			return n, "memory.max", ok
		}
	}
	for _, d := range v1 {
		if b, err := fs.ReadFile(root, d+"/memory.limit_in_bytes"); err == nil {
			n, ok := parseLimit(b, "")
			return n, "memory.limit_in_bytes", ok && n < v1Unlimited
		}
	}
	return 0, "", false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// parseLimit reads a limit file's number; unlimited (when not "") is the
// word that means none.
func parseLimit(b []byte, unlimited string) (int64, bool) {
	v := strings.TrimSpace(string(b))
	if unlimited != "" && v == unlimited {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
