package framing

import "encoding/binary"

// SizeLen is the length of the frame size prefix.
const SizeLen = 4

// CheckSize reads the size prefix in p (at least 4 bytes) and checks it
// against max before anything is allocated for the body. It returns the
// body length.
func CheckSize(p []byte, max int) (int, error) {
	size := int32(binary.BigEndian.Uint32(p))
	looks := sniff(p) // a ClientHello reads as ~369 MB, under a large limit
	if looks == "" && size >= 0 && int(size) <= max {
		return int(size), nil
	}
	return 0, &SizeError{Size: size, Max: max, Looks: looks}
}

// sniff names the protocol a refused prefix most likely belongs to.
func sniff(p []byte) string {
	switch {
	case p[0] == 0x16 && p[1] == 0x03 && p[2] <= 0x04:
		return "TLS ClientHello"
	case isHTTPMethod(p):
		return "HTTP request"
	}
	return ""
}

func isHTTPMethod(p []byte) bool {
	switch string(p[:4]) {
	case "GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN", "PRI ":
		return true
	}
	return false
}
