//go:build linux && nodetest

package node_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// image is one locally built image: a static binary FROM scratch.
type image struct {
	ref    string   // as pods name it (imagePullPolicy: Never)
	binary string   // its one program
	entry  string   // where the program is in the image; default /<its base name>
	cmd    []string // the image's CMD; default none
	user   string   // the image's USER
	files  []string // extra files, "host-path:image-path"
}

// The images the scenarios run. kproxy's is the Dockerfile's final stage
// (the same build of the binary, at the same path, with the same config,
// user, entrypoint and command) on another base layer: distroless's
// registry is unreachable here, so the two things its static image gives
// kproxy, CA certificates and the nonroot user, come from this Debian
// machine (ca-certificates, and a passwd and group naming 65532).
const (
	pauseImage  = "kproxy.test/pause:ci"
	kproxyImage = "kproxy.test/kproxy:ci"
	injectImage = "kproxy.test/kproxy-inject:ci"
	appImage    = "kproxy.test/app:ci"
	brokerImage = "kproxy.test/kfake:ci"
)

var (
	imagesOnce sync.Once
	imagesErr  error
)

// repoRoot is the repository's root, from this package's directory.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", "..", ".."))
}

// buildImages builds the binaries, makes an image of each with buildah and
// imports it into containerd's k8s.io namespace, once per run.
func (c *cluster) buildImages() error {
	imagesOnce.Do(func() { imagesErr = c.buildImagesOnce() })
	return imagesErr
}

func (c *cluster) buildImagesOnce() error {
	out := filepath.Join(baseDir, "images")
	root := repoRoot()
	builds := []struct{ dir, pkg, bin string }{
		{root, "./cmd/kproxy", "kproxy"},
		{filepath.Join(root, "inject"), "./cmd/kproxy-inject", "kproxy-inject"},
		{filepath.Join(root, "examples", "k8s"), "./node/images/app", "app"},
		{filepath.Join(root, "examples", "k8s"), "./node/images/kfake", "kfake"},
	}
	errs := make(chan error, len(builds))
	for _, b := range builds {
		go func() {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.buildVersion=ci", "-o", filepath.Join(out, b.bin), b.pkg)
			cmd.Dir = b.dir
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if o, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("build %s: %v: %s", b.bin, err, o)
				return
			}
			errs <- nil
		}()
	}
	for range builds {
		if err := <-errs; err != nil {
			return err
		}
	}
	var baseLayer []string
	for name, text := range map[string]string{
		"passwd": "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"group":  "root:x:0:\nnonroot:x:65532:\n",
	} {
		path := filepath.Join(out, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
		baseLayer = append(baseLayer, path+":/etc/"+name)
	}
	const roots = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(roots); err != nil {
		return fmt.Errorf("the kproxy image's CA certificates: %v (apt-get install ca-certificates)", err)
	}
	baseLayer = append(baseLayer, roots+":"+roots)
	images := []image{
		{ref: pauseImage, binary: filepath.Join(c.bin, "pause"), user: "65535:65535"},
		{ref: kproxyImage, binary: filepath.Join(out, "kproxy"), entry: "/usr/local/bin/kproxy", user: "65532:65532",
			cmd:   []string{"run", "--config", "/etc/kproxy/kproxy.yaml"},
			files: append(baseLayer, filepath.Join(root, "examples", "k8s", "kproxy.yaml")+":/etc/kproxy/kproxy.yaml")},
		{ref: injectImage, binary: filepath.Join(out, "kproxy-inject"), user: "65532:65532"},
		{ref: appImage, binary: filepath.Join(out, "app"), user: "65532:65532"},
		{ref: brokerImage, binary: filepath.Join(out, "kfake"), user: "65532:65532"},
	}
	for _, im := range images {
		if err := c.buildImage(im); err != nil {
			return err
		}
	}
	return nil
}

// buildImage makes one image with buildah (vfs storage in the node's
// directory, removed with it) and imports it with ctr.
func (c *cluster) buildImage(im image) error {
	storage := []string{"--root", filepath.Join(baseDir, "buildah", "root"), "--runroot", filepath.Join(baseDir, "buildah", "run"), "--storage-driver", "vfs"}
	bah := func(args ...string) (string, error) {
		o, err := exec.Command("buildah", append(storage, args...)...).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return "", fmt.Errorf("buildah %s: %v: %s", strings.Join(args, " "), err, ee.Stderr)
			}
			return "", err
		}
		return strings.TrimSpace(string(o)), nil
	}
	ctr, err := bah("from", "scratch")
	if err != nil {
		return err
	}
	defer bah("rm", ctr)
	entry := im.entry
	if entry == "" {
		entry = "/" + filepath.Base(im.binary)
	}
	if _, err := bah("copy", "--chmod", "0755", ctr, im.binary, entry); err != nil {
		return err
	}
	for _, f := range im.files {
		src, dst, _ := strings.Cut(f, ":")
		if _, err := bah("copy", "--chmod", "0644", ctr, src, dst); err != nil {
			return err
		}
	}
	cmd, _ := json.Marshal(im.cmd)
	if im.cmd == nil {
		cmd = []byte("")
	}
	if _, err := bah("config", "--entrypoint", fmt.Sprintf("[%q]", entry), "--cmd", string(cmd), "--user", im.user, ctr); err != nil {
		return err
	}
	tarball := filepath.Join(baseDir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(im.ref)+".tar")
	if _, err := bah("commit", "-q", ctr, "docker-archive:"+tarball+":"+im.ref); err != nil {
		return err
	}
	sock := filepath.Join(baseDir, "containerd", "containerd.sock")
	if o, err := exec.Command(filepath.Join(c.bin, "ctr"), "--address", sock, "-n", "k8s.io", "images", "import", "--local", tarball).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr import %s: %v: %s", im.ref, err, o)
	}
	return nil
}
