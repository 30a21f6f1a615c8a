//go:build linux && nodetest

package node_test

import (
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
	binary string   // its one file, /<base name of binary> in the image
	user   string   // the image's USER
	files  []string // extra files, "host-path:image-path"
}

// The images the scenarios run. kproxy's follows the Dockerfile's final
// stage (the same binary build, config and user); its base layer is
// scratch instead of distroless, whose registry is unreachable here.
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
	images := []image{
		{ref: pauseImage, binary: filepath.Join(c.bin, "pause"), user: "65535:65535"},
		{ref: kproxyImage, binary: filepath.Join(out, "kproxy"), user: "65532:65532",
			files: []string{filepath.Join(root, "examples", "k8s", "kproxy.yaml") + ":/etc/kproxy/kproxy.yaml"}},
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
	entry := "/" + filepath.Base(im.binary)
	if _, err := bah("copy", "--chmod", "0755", ctr, im.binary, entry); err != nil {
		return err
	}
	for _, f := range im.files {
		src, dst, _ := strings.Cut(f, ":")
		if _, err := bah("copy", "--chmod", "0644", ctr, src, dst); err != nil {
			return err
		}
	}
	if _, err := bah("config", "--entrypoint", fmt.Sprintf("[%q]", entry), "--cmd", "", "--user", im.user, ctr); err != nil {
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
