//go:build linux && nodetest

package node_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The node's addresses: a /30 between the host and the node's network
// namespace, the pods' subnet on the node's bridge, the Services' range.
// The test process, and the brokers "outside the cluster", are on hostIP.
const (
	hostIP      = "10.250.0.1"
	nodeIP      = "10.250.0.2"
	podCIDR     = "10.244.0.0/24"
	serviceCIDR = "10.96.0.0/16"
	apiPort     = 6443
	nodeName    = "kproxy-node"
	adminToken  = "kproxy-node-admin"
)

// logDir keeps the node's component logs after teardown, for a look at
// a failed run (the next run replaces them).
var logDir = filepath.Join(os.TempDir(), "kproxy-node-logs")

// cluster is the running node and the API server's client.
type cluster struct {
	bin    string // the node's binaries (install-node.sh)
	apiBin string // kube-apiserver and etcd (install-apiserver.sh)
	holder int    // pid of the process that owns the node's mount namespace
	ca     *authority
	api    *http.Client
	procs  map[string]*exec.Cmd
	exited map[string]chan struct{}
	mu     sync.Mutex
	// injecting: kproxy-inject runs in the cluster (startInjector).
	injecting bool
}

var (
	theCluster  *cluster
	clusterErr  error
	clusterOnce sync.Once
)

// nodeCluster starts the node and imports the scenarios' images once for
// the package's tests, and fails the test when that could not be done.
func nodeCluster(t *testing.T) *cluster {
	t.Helper()
	clusterOnce.Do(func() {
		start := time.Now()
		theCluster, clusterErr = startCluster()
		if clusterErr == nil {
			fmt.Fprintf(os.Stderr, "== node: cluster up in %.1fs\n", time.Since(start).Seconds())
		}
	})
	if clusterErr != nil {
		t.Fatalf("the node did not start: %v\n%s", clusterErr, logTails())
	}
	if err := theCluster.buildImages(); err != nil {
		t.Fatal(err)
	}
	return theCluster
}

// binDir finds a directory of binaries an install script built, failing
// with the command to run when it is missing or half built.
func binDir(env, sub, script string, names ...string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		cache := os.Getenv("KPROXY_E2E_CACHE")
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				return "", err
			}
			cache = filepath.Join(base, "kproxy-e2e")
		}
		dir = filepath.Join(cache, sub)
		if _, err := os.Stat(filepath.Join(dir, "stamp")); err != nil {
			return "", fmt.Errorf("%s holds no finished build: run `bash examples/k8s/tools/%s` from the repository root, or set %s", dir, script, env)
		}
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return "", fmt.Errorf("%s is missing: run `bash examples/k8s/tools/%s` from the repository root, or set %s", filepath.Join(dir, n), script, env)
		}
	}
	return dir, nil
}

// run runs a setup command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// The directories the node's components write outside their own state
// directories, hidden under tmpfs in the node's mount namespace so that
// nothing they write there reaches the host: runtime sockets and the
// shims' state, the pods' network namespaces, CNI's cache, pod logs.
var privateDirs = []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/log/pods", "/var/log/containers"}

func startCluster() (*cluster, error) {
	c := &cluster{procs: map[string]*exec.Cmd{}, exited: map[string]chan struct{}{}}
	var err error
	if c.bin, err = binDir("KPROXY_NODE_DIR", "node", "install-node.sh",
		"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "pause"); err != nil {
		return nil, err
	}
	if c.apiBin, err = binDir("KPROXY_APISERVER_DIR", "apiserver", "install-apiserver.sh", "kube-apiserver", "etcd"); err != nil {
		return nil, err
	}
	for _, tool := range []string{"runc", "iptables", "nsenter", "unshare", "ip", "buildah"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is missing: apt-get install runc containernetworking-plugins iptables buildah", tool)
		}
	}
	os.RemoveAll(logDir)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	for _, d := range []string{"etcd", "pki", "kubelet", "containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "images"} {
		if err := os.MkdirAll(filepath.Join(baseDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	// The node's cgroup: every process of the node, the shims and
	// containers they start, and the pods' cgroups (the kubelet's
	// cgroupRoot) are below it, so teardown finds them all.
	for _, root := range cgroupRoots() {
		top := filepath.Join(root, cgroupDir)
		if err := os.MkdirAll(top, 0o755); err != nil {
			return nil, fmt.Errorf("make the node's cgroup: %v", err)
		}
		// A v1 cpuset cgroup starts with no CPUs and no memory nodes, and
		// no process can join it (runc's init dies, "can't get final
		// child's PID from pipe"): give the node's the root's, and have
		// every cgroup below it (the kubelet's, the pods') copy its
		// parent's.
		if _, err := os.Stat(filepath.Join(root, "cpuset.cpus")); err == nil {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, _ := os.ReadFile(filepath.Join(root, f))
				if err := os.WriteFile(filepath.Join(top, f), b, 0o644); err != nil {
					return nil, fmt.Errorf("set the node's %s: %v", f, err)
				}
			}
			os.WriteFile(filepath.Join(top, "cgroup.clone_children"), []byte("1"), 0o644)
		}
		if err := os.MkdirAll(filepath.Join(top, "system"), 0o755); err != nil {
			return nil, fmt.Errorf("make the node's cgroup: %v", err)
		}
	}
	for _, step := range []func() error{c.network, c.pki, c.startHolder, c.startControlPlane, c.startRuntime, c.startNode} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// network makes the node's namespace and its link to the host.
func (c *cluster) network() error {
	steps := [][]string{
		{"ip", "netns", "add", netnsName},
		{"ip", "link", "add", hostVeth, "type", "veth", "peer", "name", nodeVeth, "netns", netnsName},
		{"ip", "addr", "add", hostIP + "/30", "dev", hostVeth},
		{"ip", "link", "set", hostVeth, "up"},
		{"ip", "-n", netnsName, "addr", "add", nodeIP + "/30", "dev", nodeVeth},
		{"ip", "-n", netnsName, "link", "set", nodeVeth, "up"},
		{"ip", "-n", netnsName, "link", "set", "lo", "up"},
		{"ip", "-n", netnsName, "route", "add", "default", "via", hostIP},
		// The tests reach pods from the host, through the node: a route
		// via the link, gone with it.
		{"ip", "route", "add", podCIDR, "via", nodeIP, "dev", hostVeth},
		// Pods' packets are routed by the node; a pod reaching a Service
		// whose endpoint is on the same bridge needs bridged packets to
		// pass iptables for kube-proxy's NAT to be undone on the reply.
		{"ip", "netns", "exec", netnsName, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// pki writes the API server's certificate, the service-account key, the
// static tokens and a kubeconfig per component.
func (c *cluster) pki() error {
	var err error
	if c.ca, err = newAuthority("kproxy-node-ca"); err != nil {
		return err
	}
	cert, key, err := c.ca.issue(2, "kube-apiserver",
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP(nodeIP), net.ParseIP("10.96.0.1"), net.ParseIP("127.0.0.1")})
	if err != nil {
		return err
	}
	sa, err := serviceAccountKey()
	if err != nil {
		return err
	}
	// Static tokens; authorization is AlwaysAllow, so the groups only
	// name who is who in the API server's log.
	tokens := adminToken + ",admin,admin,system:masters\n" +
		"kproxy-node-kubelet,system:node:" + nodeName + ",kubelet,system:nodes\n" +
		"kproxy-node-kcm,system:kube-controller-manager,kcm\n" +
		"kproxy-node-scheduler,system:kube-scheduler,scheduler\n" +
		"kproxy-node-proxy,system:kube-proxy,proxy\n"
	files := map[string][]byte{"ca.crt": c.ca.PEM, "apiserver.crt": cert, "apiserver.key": key, "sa.key": sa, "tokens.csv": []byte(tokens)}
	for _, who := range []string{"kubelet", "kcm", "scheduler", "proxy"} {
		files[who+".kubeconfig"] = []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: node
  cluster: {server: "https://%s:%d", certificate-authority: %s}
users:
- name: %s
  user: {token: kproxy-node-%s}
contexts:
- name: node
  context: {cluster: node, user: %s}
current-context: node
`, nodeIP, apiPort, pkiPath("ca.crt"), who, who, who))
	}
	for name, b := range files {
		if err := os.WriteFile(pkiPath(name), b, 0o600); err != nil {
			return err
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.PEM)
	c.api = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
	return nil
}

func pkiPath(name string) string { return filepath.Join(baseDir, "pki", name) }

// wrap returns the command line that starts bin in the node: in its
// cgroup (the shell moves itself there, then execs), its network
// namespace and, once the holder runs, its mount namespace.
func (c *cluster) wrap(bin string, args ...string) []string {
	var moves []string
	for _, root := range cgroupRoots() {
		moves = append(moves, fmt.Sprintf("echo $$ 2>/dev/null > %s/cgroup.procs", filepath.Join(root, cgroupDir, "system")))
	}
	ns := []string{"nsenter", "--net=/run/netns/" + netnsName}
	if c.holder != 0 {
		ns = append(ns, fmt.Sprintf("--mount=/proc/%d/ns/mnt", c.holder))
	}
	return append([]string{"sh", "-c", strings.Join(moves, "; ") + `; exec "$@"`, "sh"}, append(append(ns, "--"), append([]string{bin}, args...)...)...)
}

// start runs one of the node's processes, its output in logs/<name>.log,
// killed with the test binary (and by teardown in any case).
func (c *cluster) start(name string, env []string, bin string, args ...string) error {
	out, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return err
	}
	line := c.wrap(bin, args...)
	cmd := exec.Command(line[0], line[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(append(os.Environ(), "PATH="+c.bin+":/usr/sbin:/usr/bin:/sbin:/bin"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(done) }()
	c.mu.Lock()
	c.procs[name], c.exited[name] = cmd, done
	c.mu.Unlock()
	return nil
}

// startHolder starts the process that owns the node's mount namespace:
// private, so that the kubelet's volume mounts, containerd's rootfs
// mounts and the pods' namespace files never appear on the host and end
// with the node; the directories in privateDirs get a tmpfs of their own.
func (c *cluster) startHolder() error {
	var script []string
	for _, d := range privateDirs {
		script = append(script, fmt.Sprintf("mkdir -p %s && mount -t tmpfs -o mode=0755 tmpfs %s", d, d))
	}
	script = append(script, "echo ready", "exec sleep infinity")
	if err := c.start("holder", nil, "unshare", "--mount", "--propagation", "private", "sh", "-c", strings.Join(script, " && ")); err != nil {
		return err
	}
	cmd := c.procs["holder"]
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(logDir, "holder.log"))
		if strings.Contains(string(b), "ready") {
			c.holder = cmd.Process.Pid
			return nil
		}
		select {
		case <-c.exited["holder"]:
			return fmt.Errorf("the mount namespace's holder exited: %s", b)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("the mount namespace's holder never got ready")
}

// startControlPlane starts etcd, kube-apiserver, the controller manager
// and the scheduler, and waits for the API server.
func (c *cluster) startControlPlane() error {
	if err := c.start("etcd", nil, filepath.Join(c.apiBin, "etcd"),
		"--name", "node", "--data-dir", filepath.Join(baseDir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "node=http://127.0.0.1:2380", "--unsafe-no-fsync"); err != nil {
		return err
	}
	if err := c.start("kube-apiserver", nil, filepath.Join(c.apiBin, "kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:2379",
		"--bind-address", nodeIP, "--advertise-address", nodeIP, "--secure-port", fmt.Sprint(apiPort),
		"--tls-cert-file", pkiPath("apiserver.crt"), "--tls-private-key-file", pkiPath("apiserver.key"),
		"--client-ca-file", pkiPath("ca.crt"),
		"--token-auth-file", pkiPath("tokens.csv"),
		"--authorization-mode", "AlwaysAllow", "--anonymous-auth=false",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", pkiPath("sa.key"), "--service-account-signing-key-file", pkiPath("sa.key"),
		"--service-cluster-ip-range", serviceCIDR,
		// Webhooks (kproxy-inject) are called at their Service's
		// endpoints, which the API server, outside pod networking in a
		// cluster without a kube-proxy on its own host, can reach.
		"--enable-aggregator-routing=true",
		// The node name is not in any DNS: reach the kubelet at its IP.
		"--kubelet-preferred-address-types", "InternalIP",
		"--cert-dir", filepath.Join(baseDir, "pki", "generated")); err != nil {
		return err
	}
	if err := c.waitAPI(); err != nil {
		return err
	}
	if err := c.start("kube-controller-manager", nil, filepath.Join(c.bin, "kube-controller-manager"),
		"--kubeconfig", pkiPath("kcm.kubeconfig"), "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "10257",
		"--root-ca-file", pkiPath("ca.crt"), "--service-account-private-key-file", pkiPath("sa.key"),
		"--use-service-account-credentials=false", "--controllers", "*,-nodeipam",
		"--cluster-cidr", "10.244.0.0/16", "--service-cluster-ip-range", serviceCIDR); err != nil {
		return err
	}
	return c.start("kube-scheduler", nil, filepath.Join(c.bin, "kube-scheduler"),
		"--kubeconfig", pkiPath("scheduler.kubeconfig"), "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "10259")
}

// waitAPI polls the API server's /readyz from the host.
func (c *cluster) waitAPI() error {
	var last string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		code, body, err := c.do("GET", "/readyz", nil)
		if err == nil && code == 200 {
			return nil
		}
		last = fmt.Sprintf("%d %s %v", code, body, err)
		for _, n := range []string{"etcd", "kube-apiserver"} {
			select {
			case <-c.exited[n]:
				return fmt.Errorf("%s exited before the API server was ready", n)
			default:
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("the API server never became ready: %s", last)
}

// do sends one request to the API server as the admin.
func (c *cluster) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, fmt.Sprintf("https://%s:%d%s", nodeIP, apiPort, path), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		if method == "PATCH" {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
	}
	resp, err := c.api.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// runcPath is the runc the shims run: Debian's, behind runcScript.
var runcPath = filepath.Join(baseDir, "runc")

// runcScript runs Debian's runc and, when a call fails, copies the log the
// shim gave it (--log) into the logs directory: the shim passes on only
// the last line of it, and removes the bundle that holds it.
var runcScript = `#!/bin/sh
/usr/sbin/runc "$@"
rc=$?
if [ $rc -ne 0 ]; then
  prev=
  for a in "$@"; do
    [ "$prev" = --log ] && cp "$a" "` + logDir + `/runc-$$.log" 2>/dev/null
    prev=$a
  done
  echo "runc $*: exit $rc" >> "` + logDir + `/runc-failures.log"
fi
exit $rc
`

// startRuntime writes containerd's and CNI's configuration and starts
// containerd.
func (c *cluster) startRuntime() error {
	sock := filepath.Join(baseDir, "containerd", "containerd.sock")
	conf := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    # built locally (tools/pause): no registry is reachable
    sandbox = "kproxy.test/pause:ci"

[plugins.'io.containerd.cri.v1.runtime']
  # Root here lacks CAP_SYS_RESOURCE, so no process may lower its
  # oom_score_adj: the kubelet asks -998 for every sandbox (-997 for a
  # Guaranteed pod's containers), and runc's init died on it ("failed to
  # update /proc/self/oom_score_adj: Permission denied"). Scores below
  # containerd's own are raised to it instead.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        # runc behind a script that keeps its log of a failed call
        # (the shim reports only its last line, and removes the bundle)
        BinaryName = %[5]q
        # no systemd on this host: the kubelet's cgroupDriver is cgroupfs
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[4]q
`, filepath.Join(baseDir, "containerd", "root"), filepath.Join(baseDir, "containerd", "state"), sock, filepath.Join(baseDir, "cni", "net.d"), runcPath)
	if err := os.WriteFile(filepath.Join(baseDir, "containerd", "config.toml"), []byte(conf), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(runcPath, []byte(runcScript), 0o755); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kproxy-node",
  "plugins": [
    {"type": "bridge", "bridge": "kpbr0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR, filepath.Join(baseDir, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(baseDir, "cni", "net.d", "10-kproxy-node.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	if err := c.start("containerd", nil, filepath.Join(c.bin, "containerd"), "--config", filepath.Join(baseDir, "containerd", "config.toml")); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := exec.Command(filepath.Join(c.bin, "ctr"), "--address", sock, "version").Run(); err == nil {
			return nil
		}
		select {
		case <-c.exited["containerd"]:
			return fmt.Errorf("containerd exited")
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("containerd never answered")
}

// startNode starts kube-proxy and the kubelet and waits for the node to
// be Ready.
func (c *cluster) startNode() error {
	proxyConf := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
clusterCIDR: 10.244.0.0/16
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The node's network namespace is new: leave the host-wide conntrack
# table size alone.
conntrack: {maxPerCore: 0}
`, pkiPath("proxy.kubeconfig"), nodeName, nodeIP)
	if err := os.WriteFile(filepath.Join(baseDir, "kube-proxy.yaml"), []byte(proxyConf), 0o600); err != nil {
		return err
	}
	if err := c.start("kube-proxy", nil, filepath.Join(c.bin, "kube-proxy"), "--config", filepath.Join(baseDir, "kube-proxy.yaml")); err != nil {
		return err
	}
	kubeletConf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host runs cgroup v1 (a hybrid layout with an empty unified
# hierarchy). KEP-5573 has kubelets refuse v1 unless failCgroupV1 is
# false; the pinned version still runs on v1 with it (removal is not
# before 1.38).
failCgroupV1: false
# No systemd: cgroups are managed through cgroupfs, below the node's own
# cgroup so that teardown finds every pod's.
cgroupDriver: cgroupfs
cgroupRoot: /%s
failSwapOn: false
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
podCIDR: %s
maxPods: 30
# The tests change Secrets and ConfigMaps and wait for the kubelet to
# swap them into volumes: watch them, and sync pods often.
configMapAndSecretChangeDetectionStrategy: Watch
syncFrequency: 10s
# A shared test machine's disk may be nearly full: never evict for it,
# never collect the locally built images (they cannot be pulled again).
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: /var/log/pods
serializeImagePulls: false
`, cgroupDir, filepath.Join(baseDir, "containerd", "containerd.sock"), nodeIP, podCIDR)
	if err := os.WriteFile(filepath.Join(baseDir, "kubelet.yaml"), []byte(kubeletConf), 0o600); err != nil {
		return err
	}
	if err := c.start("kubelet", nil, filepath.Join(c.bin, "kubelet"),
		"--config", filepath.Join(baseDir, "kubelet.yaml"), "--kubeconfig", pkiPath("kubelet.kubeconfig"),
		"--root-dir", filepath.Join(baseDir, "kubelet"), "--cert-dir", filepath.Join(baseDir, "kubelet", "pki"),
		"--hostname-override", nodeName, "--node-ip", nodeIP); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		code, body, err := c.do("GET", "/api/v1/nodes/"+nodeName, nil)
		if err == nil && code == 200 {
			var n struct {
				Status struct {
					Conditions []struct{ Type, Status, Message string }
				}
			}
			json.Unmarshal(body, &n)
			for _, cond := range n.Status.Conditions {
				if cond.Type == "Ready" {
					if cond.Status == "True" {
						return nil
					}
					last = cond.Message
				}
			}
		}
		for _, name := range []string{"kubelet", "containerd", "kube-proxy"} {
			select {
			case <-c.exited[name]:
				return fmt.Errorf("%s exited before the node was Ready", name)
			default:
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("the node never became Ready: %s", last)
}

// logTails returns the end of each component's log, for a failure.
func logTails() string {
	var b strings.Builder
	names, _ := filepath.Glob(filepath.Join(logDir, "*.log"))
	for _, n := range names {
		data, _ := os.ReadFile(n)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(n), data)
	}
	return b.String()
}
