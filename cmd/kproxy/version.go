package main

import "runtime/debug"

// buildVersion is stamped at build time:
// go build -ldflags "-X main.buildVersion=v1.2.3" ./cmd/kproxy
var buildVersion = ""

func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
