package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
)

// Keys read the digest of every file a stage reads, and a live ISO is a gigabyte: hashing it
// on every plan and build would make a fully cached build take seconds. Like git's index, the
// cache remembers each regular file's digest with the stat data it was computed from
// (device, inode, size, modification and change time) and reuses it while those match.
// Directories are always hashed: they are small (extra manifests) and their stat data does
// not follow changes below them.

type memoEntry struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtimeNs"`
	Ctime  int64  `json:"ctimeNs"`
	Digest string `json:"digest"`
}

func statKey(info os.FileInfo) (memoEntry, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return memoEntry{}, false
	}
	return memoEntry{
		Dev: uint64(st.Dev), Ino: st.Ino, Size: info.Size(),
		Mtime: info.ModTime().UnixNano(), Ctime: st.Ctim.Nano(),
	}, true
}

// memoDigest returns the digest of path, from the cache's memo when the file is unchanged.
func (c *Cache) memoDigest(ctx context.Context, path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	cur, ok := statKey(info)
	if info.IsDir() || !ok {
		return digestPath(ctx, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	name := sha256.Sum256([]byte(abs))
	memo := filepath.Join(c.Dir, "digests", hex.EncodeToString(name[:])+".json")
	if b, err := os.ReadFile(memo); err == nil {
		var old memoEntry
		if json.Unmarshal(b, &old) == nil && old.Digest != "" {
			cached := old
			cached.Digest = ""
			if cached == cur {
				return old.Digest, nil
			}
		}
	}
	dg, err := digestPath(ctx, path)
	if err != nil {
		return "", err
	}
	// Only remember the digest if the file did not change while it was read.
	if after, err := os.Stat(path); err == nil {
		if a, ok := statKey(after); ok && a == cur {
			cur.Digest = dg
			if b, err := json.Marshal(cur); err == nil {
				WriteFileAtomic(memo, b, 0o644)
			}
		}
	}
	return dg, nil
}
