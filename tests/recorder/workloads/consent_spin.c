/* A busy process for the consent test: spins in a function of its own until killed. */
__attribute__((noinline)) static void pfr_consent_spin(void)
{
    volatile unsigned long x = 0;
    for (;;)
        x++;
}

int main(void)
{
    pfr_consent_spin();
    return 0;
}
