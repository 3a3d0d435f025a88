// The host side of the fixture executables and library: nothing runs on a
// GPU; the images only need to be linked in.
int main(void) { return 0; }
