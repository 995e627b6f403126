//go:build !linux

package output

// CheckNotMounted is only implemented on Linux, where seeds are written.
func CheckNotMounted(device string) error { return nil }
