package harness

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpEstablished is the state code of ESTABLISHED in /proc/net/tcp.
const tcpEstablished = "01"

// EstablishedTo lists the ESTABLISHED TCP connections that process pid
// holds open to addr ("ip:port"), as "local->remote". It reads
// /proc/<pid>/fd for the process's socket inodes and /proc/<pid>/net/tcp
// and tcp6 for their endpoints, so it needs no tools and sees exactly what
// the kernel has: a connection the process forgot in its own bookkeeping
// still shows here. tcp6 entries with IPv4-mapped addresses count too.
func EstablishedTo(pid int, addr string) ([]string, error) {
	want, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, file := range []string{"tcp", "tcp6"} {
		conns, err := readProcTCP(filepath.Join("/proc", strconv.Itoa(pid), "net", file))
		if err != nil {
			if os.IsNotExist(err) && file == "tcp6" {
				continue // IPv6 disabled
			}
			return nil, err
		}
		for _, c := range conns {
			if c.state != tcpEstablished || !inodes[c.inode] {
				continue
			}
			remote := netip.AddrPortFrom(c.remote.Addr().Unmap(), c.remote.Port())
			if remote == want {
				found = append(found, c.local.String()+"->"+remote.String())
			}
		}
	}
	return found, nil
}

// socketInodes is the set of socket inodes among pid's open descriptors.
func socketInodes(pid int) (map[string]bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	inodes := make(map[string]bool)
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since ReadDir
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return inodes, nil
}

// procTCP is one line of /proc/net/tcp{,6}.
type procTCP struct {
	local, remote netip.AddrPort
	state, inode  string
}

func readProcTCP(path string) ([]procTCP, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []procTCP
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		local, err := parseProcAddr(fs[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		remote, err := parseProcAddr(fs[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, procTCP{local: local, remote: remote, state: fs[3], inode: fs[9]})
	}
	return out, sc.Err()
}

// parseProcAddr decodes "0100007F:2382": the address is printed as 32-bit
// words in the host's byte order, the port as big-endian hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 { // the printed word, stored as the kernel holds it
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port in %q", s)
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// TreeConnection is an ESTABLISHED TCP connection held by a process.
type TreeConnection struct {
	Pid           int
	Local, Remote netip.AddrPort
}

func (c TreeConnection) String() string {
	return fmt.Sprintf("pid %d %s->%s", c.Pid, c.Local, c.Remote)
}

// EstablishedFromTree lists the ESTABLISHED TCP connections to any of
// remotes ("ip:port") held by process root and its descendants, leaving
// out the processes in skip and their descendants. A client library run
// in a child process (and whatever that starts) is seen as well as one
// in root itself; the brokers and kproxies that root started are skipped.
func EstablishedFromTree(root int, skip []int, remotes []string) ([]TreeConnection, error) {
	want := make(map[netip.AddrPort]bool, len(remotes))
	for _, r := range remotes {
		ap, err := netip.ParseAddrPort(r)
		if err != nil {
			return nil, err
		}
		want[ap] = true
	}
	pids, err := processTree(root, skip)
	if err != nil {
		return nil, err
	}
	owner := map[string]int{} // socket inode → pid
	for _, pid := range pids {
		inodes, err := socketInodes(pid)
		if err != nil {
			continue // exited since the tree was read
		}
		for ino := range inodes {
			owner[ino] = pid
		}
	}
	var found []TreeConnection
	for _, file := range []string{"tcp", "tcp6"} {
		conns, err := readProcTCP(filepath.Join("/proc", strconv.Itoa(root), "net", file))
		if err != nil {
			if os.IsNotExist(err) && file == "tcp6" {
				continue
			}
			return nil, err
		}
		for _, c := range conns {
			pid, ok := owner[c.inode]
			if c.state != tcpEstablished || !ok {
				continue
			}
			remote := netip.AddrPortFrom(c.remote.Addr().Unmap(), c.remote.Port())
			if want[remote] {
				local := netip.AddrPortFrom(c.local.Addr().Unmap(), c.local.Port())
				found = append(found, TreeConnection{Pid: pid, Local: local, Remote: remote})
			}
		}
	}
	return found, nil
}

// processTree is root and its descendants, without skip and theirs, from
// the parent ids in /proc/<pid>/stat.
func processTree(root int, skip []int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	skipped := map[int]bool{}
	for _, p := range skip {
		skipped[p] = true
	}
	var tree []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if skipped[p] {
			continue
		}
		tree = append(tree, p)
		queue = append(queue, children[p]...)
	}
	return tree, nil
}
