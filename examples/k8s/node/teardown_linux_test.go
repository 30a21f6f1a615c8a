//go:build linux && nodetest

package node_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's names on the host: everything the node makes is under these,
// so a run can find and remove what an earlier one left.
const (
	netnsName = "kproxy-node"          // the node's network namespace
	hostVeth  = "kpnode0"              // the host's end of the link to it
	nodeVeth  = "kpnode1"              // the node's end
	cgroupDir = "kproxy-node"          // below every cgroup hierarchy's root
	baseDir   = "/var/tmp/kproxy-node" // state of every node component
)

// cgroupRoots lists the mounted cgroup hierarchies (v1 controllers, the
// named systemd one, the unified one).
func cgroupRoots() []string {
	var roots []string
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		i := 0
		for i < len(fields) && fields[i] != "-" {
			i++
		}
		if i+1 < len(fields) && (fields[i+1] == "cgroup" || fields[i+1] == "cgroup2") {
			roots = append(roots, fields[4])
		}
	}
	return roots
}

// nodePids lists every process in the node's cgroup, in any hierarchy.
func nodePids() []int {
	seen := map[int]bool{}
	for _, root := range cgroupRoots() {
		filepath.Walk(filepath.Join(root, cgroupDir), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || info.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var pids []int
	for pid := range seen {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

// teardown removes every trace of a node, this run's or one an earlier
// run left when its test binary died: it kills every process in the
// node's cgroup (containerd's shims and the containers included, which
// outlive their parents), removes the cgroups, the network namespace (and
// with it the link, the bridge, the pods' links and every iptables rule
// kube-proxy wrote) and the state directory. Mounts need no step: they
// live in the node's private mount namespace, which ends with its last
// process. It returns what it could not remove.
func teardown() []string {
	for round := 0; round < 100; round++ {
		pids := nodePids()
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, root := range cgroupRoots() {
		var dirs []string
		filepath.Walk(filepath.Join(root, cgroupDir), func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children first
			for try := 0; try < 20 && os.Remove(dirs[i]) != nil; try++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	if _, err := os.Stat("/run/netns/" + netnsName); err == nil {
		exec.Command("ip", "netns", "del", netnsName).Run()
	}
	exec.Command("ip", "link", "del", hostVeth).Run() // gone with the namespace; in case it was not
	os.RemoveAll(baseDir)
	return leftovers()
}

// leftovers names whatever of a node is still on the host: processes in
// its cgroup, its cgroups, links, mounts, the namespace, the directory.
func leftovers() []string {
	var left []string
	if pids := nodePids(); len(pids) > 0 {
		left = append(left, fmt.Sprintf("processes %v", pids))
	}
	for _, root := range cgroupRoots() {
		if _, err := os.Stat(filepath.Join(root, cgroupDir)); err == nil {
			left = append(left, "cgroup "+filepath.Join(root, cgroupDir))
		}
	}
	if out, _ := exec.Command("ip", "-o", "link", "show").Output(); strings.Contains(string(out), "kpnode") {
		left = append(left, "a kpnode link")
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), "kproxy-node") {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "kproxy-node") {
				left = append(left, "mount "+strings.Fields(l)[4])
			}
		}
	}
	if _, err := os.Stat("/run/netns/" + netnsName); err == nil {
		left = append(left, "netns "+netnsName)
	}
	if _, err := os.Stat(baseDir); err == nil {
		left = append(left, baseDir)
	}
	return left
}

// reapEnv names the test binary a reaper waits for: the binary, started
// again with it set, waits for that process to end and then tears the
// node down, so a test binary killed without its cleanups (go test's
// -timeout, CI's SIGKILL) leaves nothing running.
const reapEnv = "KPROXY_NODE_REAP_AFTER"

// startReaper starts that reaper in its own session, outside the node's
// cgroup, so nothing that kills the test kills it.
func startReaper() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(os.TempDir(), "kproxy-node-reaper.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", reapEnv, os.Getpid()))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// reap is the reaper's whole life: wait for the test binary, tear down.
func reap(pid int) {
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(time.Second)
	}
	// A run started meanwhile holds the lock and owns whatever node there
	// is; wait for it instead of tearing its node down.
	unlock := lockNode()
	defer unlock()
	if left := teardown(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "kproxy-node reaper: left %v\n", left)
		os.Exit(1)
	}
}
