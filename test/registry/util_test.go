package registry

import "io"

func ioCopyDiscard(rc io.ReadCloser) (int64, error) {
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}
