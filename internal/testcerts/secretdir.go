package testcerts

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// SecretDir is a directory laid out the way the kubelet lays out a Secret
// volume: the files are symlinks to ..data/<name>, ..data is a symlink to a
// timestamped directory, and an update writes a new directory and swaps
// ..data with one rename. A reader never sees half an update, and the
// visible paths (dir/tls.crt) never change, only what they resolve to.
type SecretDir struct {
	Dir     string
	version int
}

// NewSecretDir makes a Secret-like directory under a test temp dir holding
// files (name -> content).
func NewSecretDir(t testing.TB, files map[string][]byte) *SecretDir {
	t.Helper()
	s := &SecretDir{Dir: t.TempDir()}
	s.Update(t, files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(s.Dir, name)); err != nil {
			t.Fatalf("testcerts: %v", err)
		}
	}
	return s
}

// Path is the visible path of a file in the volume.
func (s *SecretDir) Path(name string) string { return filepath.Join(s.Dir, name) }

// Update replaces the volume's content the way the kubelet does: write a
// new directory, point ..data_tmp at it, rename ..data_tmp over ..data,
// then remove the old directory. The set of names must stay the same.
func (s *SecretDir) Update(t testing.TB, files map[string][]byte) {
	t.Helper()
	s.version++
	ts := fmt.Sprintf("..v%04d", s.version)
	if err := os.Mkdir(filepath.Join(s.Dir, ts), 0o755); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	for name, data := range files {
		WriteFile(t, filepath.Join(s.Dir, ts, name), data)
	}
	old, _ := os.Readlink(filepath.Join(s.Dir, "..data"))
	tmp := filepath.Join(s.Dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Dir, "..data")); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(s.Dir, old)); err != nil {
			t.Fatalf("testcerts: %v", err)
		}
	}
}

// Files is the usual content of a TLS Secret: tls.crt, tls.key and,
// when ca is not nil, ca.crt.
func Files(c *Cert, ca *Cert) map[string][]byte {
	m := map[string][]byte{"tls.crt": c.CertPEM, "tls.key": c.KeyPEM}
	if ca != nil {
		m["ca.crt"] = ca.CertPEM
	}
	return m
}
