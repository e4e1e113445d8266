#include "fair_lock.h"

void pfr_fair_lock_init(pfr_fair_lock *l)
{
    pthread_mutex_init(&l->m, NULL);
    pthread_cond_init(&l->c, NULL);
    l->next = l->serving = 0;
}

void pfr_fair_lock_destroy(pfr_fair_lock *l)
{
    pthread_cond_destroy(&l->c);
    pthread_mutex_destroy(&l->m);
}

void pfr_fair_lock_acquire(pfr_fair_lock *l)
{
    pthread_mutex_lock(&l->m);
    uint64_t ticket = l->next++;
    while (ticket != l->serving)
        pthread_cond_wait(&l->c, &l->m);
    pthread_mutex_unlock(&l->m);
}

void pfr_fair_lock_release(pfr_fair_lock *l)
{
    pthread_mutex_lock(&l->m);
    l->serving++;
    pthread_cond_broadcast(&l->c);
    pthread_mutex_unlock(&l->m);
}

bool pfr_fair_lock_contended(pfr_fair_lock *l)
{
    pthread_mutex_lock(&l->m);
    bool waiting = l->next - l->serving > 1;
    pthread_mutex_unlock(&l->m);
    return waiting;
}
