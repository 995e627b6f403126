package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/pipeline/smallfile"
)

// MaxReportedFiles bounds how many written files one report describes, so a message
// stays well under MaxLineBytes.
const MaxReportedFiles = 32

// MaxIgnitionConfigFile caps the Ignition config a report describes, as the factory caps
// the config it embeds in a live ISO (16 MiB).
const MaxIgnitionConfigFile = 16 << 20

// IgnitionFileDetails describes, for the host, the files an Ignition config wrote under
// root: "file:PATH.sha256" and "file:PATH.size" always, and "file:PATH" itself only for
// short text that is not private (see contentShareable): a config also writes secrets,
// such as the pull secret, which must not leave the node through a report. A file
// whose content is held back gets "file:PATH.withheld" saying why.
// A file the config lists but that is missing is reported as "file:PATH.error".
// Only storage.files is read, which has the same shape in every 3.x spec and in
// Ignition's rendered config cache.
func IgnitionFileDetails(configPath, root string) (map[string]string, error) {
	raw, err := smallfile.Read(configPath, MaxIgnitionConfigFile)
	if err != nil {
		return nil, fmt.Errorf("ignition config: %w", err)
	}
	var cfg struct {
		Storage struct {
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("ignition config %s: %w", configPath, err)
	}
	d := map[string]string{}
	files := cfg.Storage.Files
	if len(files) > MaxReportedFiles {
		d["files.truncated"] = fmt.Sprint(len(files))
		files = files[:MaxReportedFiles]
	}
	for _, f := range files {
		key := "file:" + f.Path
		guest := filepath.Clean("/" + f.Path)
		full := filepath.Join(root, guest)
		st, err := os.Lstat(full)
		if err != nil {
			d[key+".error"] = fmt.Sprintf("detail %s: %v", key, err)
			continue
		}
		why := contentShareable(guest, st.Mode())
		fd, err := fileDetails(key, full, why == "")
		if err != nil {
			d[key+".error"] = err.Error()
			continue
		}
		if why != "" {
			fd[key+".withheld"] = why
		}
		for k, v := range fd {
			d[k] = v
		}
	}
	return d, nil
}

// contentShareable says why the content of the file at guest path p (with mode m)
// must not be sent, or "" if it may: only regular files that group or others may
// read, outside the directories that hold a node's credentials (kubelet and cluster
// credentials, root's files), whatever their mode. A 0600 file is private by its
// owner's own word.
func contentShareable(p string, m os.FileMode) string {
	for _, dir := range []string{"/var/lib/kubelet", "/root", "/etc/kubernetes"} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return "under " + dir
		}
	}
	if !m.IsRegular() {
		return "not a regular file"
	}
	if m.Perm()&0o044 == 0 {
		return fmt.Sprintf("private (mode %04o)", m.Perm())
	}
	return ""
}
