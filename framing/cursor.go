package framing

import "encoding/binary"

// cursor walks a request body field by field without copying. A read
// past the end, or a count or length that cannot fit in what is left,
// sets bad; every later read is then a no-op, so a caller checks bad once
// at the end of a loop.
type cursor struct {
	b    []byte
	off  int
	flex bool // compact lengths and tagged fields (a flexible version)
	bad  bool
}

func (c *cursor) skip(n int) {
	if c.bad || n < 0 || n > len(c.b)-c.off {
		c.bad = true
		return
	}
	c.off += n
}

// uvarint reads an unsigned varint. Nearly every one in a Fetch (a
// count, a length, an empty tag section) is one byte: that case is kept
// small enough to inline. It does not look at bad: a read after a fault
// is still bounded, and every caller checks bad before trusting it.
func (c *cursor) uvarint() uint64 {
	if off := c.off; off < len(c.b) && c.b[off] < 0x80 {
		c.off++
		return uint64(c.b[off])
	}
	return c.uvarintLong()
}

func (c *cursor) uvarintLong() uint64 {
	if c.bad {
		return 0
	}
	v, n := binary.Uvarint(c.b[c.off:])
	if n <= 0 {
		c.bad = true
		return 0
	}
	c.off += n
	return v
}

// length reads a string's or bytes' length, -1 for null.
func (c *cursor) length() int {
	if c.flex {
		u := c.uvarint()
		if c.bad || u > uint64(len(c.b)-c.off)+1 {
			c.bad = true
			return 0
		}
		return int(u) - 1
	}
	if c.bad || len(c.b)-c.off < 2 {
		c.bad = true
		return 0
	}
	n := int(int16(binary.BigEndian.Uint16(c.b[c.off:])))
	c.off += 2
	if n < -1 {
		c.bad = true
	}
	return n
}

// array reads an array's count (null counts as none), bounded by the
// bytes left: every element takes at least one.
func (c *cursor) array() int {
	var n int
	if c.flex {
		n = c.length()
	} else if c.bad || len(c.b)-c.off < 4 {
		c.bad = true
	} else {
		n = int(int32(binary.BigEndian.Uint32(c.b[c.off:])))
		c.off += 4
	}
	if c.bad || n <= 0 {
		return 0
	}
	if n > len(c.b)-c.off {
		c.bad = true
		return 0
	}
	return n
}

// topic reads a topic name (aliasing the frame), or its 16-byte id
// where the version names topics by id.
func (c *cursor) topic(byID bool) (name []byte, id [16]byte) {
	if byID {
		if !c.bad && len(c.b)-c.off >= 16 {
			copy(id[:], c.b[c.off:])
		}
		c.skip(16)
		return nil, id
	}
	n := c.length()
	start := c.off
	c.skip(max(n, 0))
	if c.bad || n <= 0 {
		return nil, id
	}
	return c.b[start:c.off:c.off], id
}

// bytesLen reads a bytes field's length (compact in flexible versions, an
// int32 before), -1 for null, bounded by what is left.
func (c *cursor) bytesLen() int {
	if c.flex {
		return c.length()
	}
	n := int(c.int32())
	if c.bad || n < -1 || n > len(c.b)-c.off {
		c.bad = true
		return 0
	}
	return n
}

func (c *cursor) int8() byte {
	if c.bad || len(c.b)-c.off < 1 {
		c.bad = true
		return 0
	}
	c.off++
	return c.b[c.off-1]
}

func (c *cursor) int16() uint16 {
	if c.bad || len(c.b)-c.off < 2 {
		c.bad = true
		return 0
	}
	c.off += 2
	return binary.BigEndian.Uint16(c.b[c.off-2:])
}

func (c *cursor) int32() int32 {
	if c.bad || len(c.b)-c.off < 4 {
		c.bad = true
		return 0
	}
	c.off += 4
	return int32(binary.BigEndian.Uint32(c.b[c.off-4:]))
}

func (c *cursor) int64() int64 {
	if c.bad || len(c.b)-c.off < 8 {
		c.bad = true
		return 0
	}
	c.off += 8
	return int64(binary.BigEndian.Uint64(c.b[c.off-8:]))
}

// tags skips a tagged-field section (flexible versions only).
func (c *cursor) tags() {
	if !c.flex || c.bad {
		return
	}
	if off := c.off; off < len(c.b) && c.b[off] == 0 { // none: the common case
		c.off++
		return
	}
	for n := c.uvarint(); n > 0 && !c.bad; n-- {
		c.uvarint() // the tag
		size := c.uvarint()
		if size > uint64(len(c.b)-c.off) {
			c.bad = true
			return
		}
		c.skip(int(size))
	}
}
