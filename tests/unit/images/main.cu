// The host side of the executable fixtures: a kernel of its own, never run.
#include <cstdio>

__global__ void from_main(int *p)
{
    *p = 1;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 99)
        from_main<<<1, 1>>>(nullptr);
    std::printf("fixture\n");
    return 0;
}
