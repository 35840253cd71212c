/* An allocator for the fuzz targets (desc.allocator): every block exactly
   its size, so ASan catches a read one byte past a message. */
static void *exact_alloc(size_t size, size_t align, void *user) {
    void *p = NULL;
    (void)user;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) == 0 ? p : NULL;
}
static void exact_free(void *p, void *user) {
    (void)user;
    free(p);
}
