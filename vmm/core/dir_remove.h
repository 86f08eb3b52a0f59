/* Removing a directory of plain files that is ours (a half-made template
 * snapshot, an ended sandbox's state). */
#ifndef TVM_DIR_REMOVE_H
#define TVM_DIR_REMOVE_H

/* Unlink every entry of dir (files; a subdirectory stays, and so then
 * does dir), then rmdir dir. A symlink at dir is unlinked, its target
 * left alone. Best effort: errors are ignored, a missing dir is nothing
 * to do. */
void dir_remove_flat(const char *dir);

#endif
