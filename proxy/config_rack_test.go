package proxy

import "testing"

// KPROXY_CLIENT_RACK wins over the file when set and not empty; unset or
// blank, the file's value stays.
func TestClientRackEnv(t *testing.T) {
	for _, c := range []struct{ file, env, want string }{
		{"zone-a", "", "zone-a"},
		{"zone-a", "   ", "zone-a"},
		{"zone-a", "zone-b", "zone-b"},
		{"", " zone-c ", "zone-c"},
	} {
		cfg := Defaults()
		cfg.ClientRack = c.file
		cfg.ApplyEnv(func(name string) string {
			if name == ClientRackEnv {
				return c.env
			}
			return ""
		})
		if cfg.ClientRack != c.want {
			t.Errorf("file %q, %s=%q: client_rack %q, want %q", c.file, ClientRackEnv, c.env, cfg.ClientRack, c.want)
		}
	}
}
