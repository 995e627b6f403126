package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// MaxReportedFiles bounds how many written files one report describes, so a message
// stays well under MaxLineBytes.
const MaxReportedFiles = 32

// IgnitionFileDetails describes, for the host, the files an Ignition config wrote under
// root: "file:PATH.sha256", "file:PATH.size" and, for short text, "file:PATH" itself.
// A file the config lists but that is missing is reported as "file:PATH.error".
// Only storage.files is read, which has the same shape in every 3.x spec and in
// Ignition's rendered config cache.
func IgnitionFileDetails(configPath, root string) (map[string]string, error) {
	raw, err := os.ReadFile(configPath)
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
		fd, err := FileDetails(key, filepath.Join(root, filepath.Clean("/"+f.Path)))
		if err != nil {
			d[key+".error"] = err.Error()
			continue
		}
		for k, v := range fd {
			d[k] = v
		}
	}
	return d, nil
}
