# make_tiny_dataset DIR: a 2-class YOLO dataset of 16x16 PNGs: 3 labelled, 1 background, 1 corrupt.
make_tiny_dataset() {
  png='iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAFklEQVR42mM4UaFBEmIY1TCqYfhqAAADaGgQ4a3ZQQAAAABJRU5ErkJggg=='
  mkdir -p "$1/images/train" "$1/labels/train"
  for name in a b c d e; do echo "$png" | base64 -d >"$1/images/train/$name.png"; done
  echo "0 0.5 0.5 0.5 0.5" >"$1/labels/train/a.txt"
  printf '1 0.25 0.25 0.2 0.2\n0 0.7 0.7 0.3 0.3\n' >"$1/labels/train/b.txt"
  echo "1 0.5 0.5 0.9 0.9" >"$1/labels/train/c.txt"
  echo "5 0.5 0.5 0.5 0.5" >"$1/labels/train/e.txt"   # class 5 >= nc: corrupt
  printf 'path: .\ntrain: images/train\nval: images/train\nnames: [square, circle]\n' >"$1/data.yaml"
}
