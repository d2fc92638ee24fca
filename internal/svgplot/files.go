package svgplot

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is a plot and the name of the file it is written to.
type File struct {
	Name string
	Plot *Plot
}

// WriteFiles writes each file's plot to dir/Name, in order, creating dir if
// need be, and returns the paths it wrote. It stops at the first error and
// returns it with the paths written before; a failed write or close names
// the file.
func WriteFiles(dir string, files []File) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		out, err := os.Create(path)
		if err != nil {
			return paths, err
		}
		err = f.Plot.WriteSVG(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, fmt.Errorf("writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
