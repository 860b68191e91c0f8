/* device.c: placeholder, being written */
extern int rt_gpu__placeholder_device;
