;;; match_oracle.el --- Emacs's own answers to Org match strings -*- lexical-binding: t -*-
;;
;; emacs -Q --batch -l match_oracle.el FILE.org ...  (from the folder the paths are relative to)
;;
;; For every match string of `match-oracle-strings' and every FILE, calls `org-map-entries' (Org's
;; matcher, as the agenda's tags view uses it, with no archive or comment skipping) in a buffer
;; visiting FILE, and prints one JSON line per file and match string with hits:
;;   {"match": M, "file": FILE, "lines": [1-based line of each hit]}, and "titles": [their headings]
;; when MATCH_ORACLE_TITLES is set (the hand-written files: the corpus's would weigh ten times more)
;; or {"match": M, "file": FILE, "error": "..."} when Emacs signals an error.  The first line
;; lists the match strings: {"matches": [...]}.  Each file is read on its own: no file-local
;; variables, #+SETUPFILE not followed, Org's defaults otherwise.  Run it with LC_ALL=C so that
;; string comparisons (`string-collate-lessp') compare code points.

(require 'org)
(require 'org-agenda)
(require 'json)
(setq enable-local-variables nil)
(advice-add 'org-file-contents :override (lambda (&rest _) nil))

(defconst match-oracle-strings
  '(;; tags: plain, +, -, :, &, |, regexps in braces, inheritance and #+FILETAGS
    "noexport" "+noexport" "-noexport" ":noexport" "noexport-TOC_5_gh" "unfold|noexport"
    "TOC_5_gh+unfold" "TOC_5_gh&-unfold" "{^TOC}" "-{export}" "{EXPORT}" "ARCHIVE" "-ARCHIVE"
    "security" "proj" "proj-security" "ops-old" "team|external" "{^e}|dana" "+{ops}+{old}"
    ;; LEVEL
    "LEVEL>1" "LEVEL=1" "LEVEL<=2" "LEVEL<>2" "LEVEL>=3+noexport" "LEVEL=18" "LEVEL<2-proj"
    ;; the TODO part
    "/TODO" "/DONE" "/TODO|DONE" "/-TODO" "/!" "/!TODO" "/!-TODO" "/NEXT|WAITING"
    "/STARTED|INPROGRESS" "noexport/TODO" "+noexport/!" "/IN-PROGRESS" "/-DONE-CANCELED"
    "security/!NEXT|TODO" "/{^[NW]}"
    ;; TODO and PRIORITY as properties
    "TODO=\"TODO\"" "TODO<>\"DONE\"" "TODO={NEXT\\|WAITING}" "TODO={^T}" "TODO=\"\""
    "PRIORITY=\"A\"" "PRIORITY=\"B\"" "PRIORITY<>\"B\"" "PRIORITY<\"B\"" "PRIORITY>=\"B\""
    ;; string, number and time comparisons of properties
    "Effort<\"1:00\"" "Effort>\"0:45\"" "Effort=\"\"" "EFFORT<>\"\"" "OWNER=\"dana\""
    "OWNER<>\"dana\"" "Owner=\"dana\"" "ROLE={^L}" "ROLE<>{^l}" "CUSTOM_ID={faq}"
    "CUSTOM_ID<>\"\"" "ID={.}" "ID<>\"\"" "SIZE>3" "SIZE<0" "SIZE=12" "SIZE>=3.5" "SIZE<-1"
    "SIZE<1e1" "SIZE=0" "WHEN>\"<2026-11-24>\"" "WHEN<\"[2026-11-24 Tue]\""
    "WHEN=\"<2026-11-23 Mon>\"" "CREATED<\"<2015-01-01>\"" "ARCHIVE_TIME>\"<2010-01-01>\""
    "SCHEDULED<\"<2026-11-22>\"" "DEADLINE>=\"<2026-11-25>\"" "CLOSED<\"<2026-11-19>\""
    "TIMESTAMP>\"<2026-11-22>\"" "TIMESTAMP_IA<\"<2026-11-15>\"" "WHEN<>\"<2026-11-23>\""
    ;; special properties
    "CATEGORY=\"prose\"" "CATEGORY=\"tasks\"" "CATEGORY=\"worg\"" "ITEM={^Introduction}"
    "ITEM=\"Installation\"" "ITEM={\\<Org\\>}" "ITEM={[[:digit:]]}" "{\\(noexport\\|unfold\\)}"
    "TAGS={ops}" "ALLTAGS={:proj:}" "FILE={people}" "COPYRIGHT\\-YEARS<>\"\""
    ;; combinations
    "+security-ops/TODO|NEXT" "PRIORITY=\"A\"+Effort<\"1:00\"" "LEVEL>1+TODO=\"TODO\""
    "-ARCHIVE+LEVEL=2/!" "proj+LEVEL=2|team" "noexport|LEVEL>4" "security+PRIORITY<\"C\"/!"
    "OWNER<>\"\"|ROLE<>\"\"" "-security-team+LEVEL>1/-DONE")
  "The match strings asked of every file.")

(defun match-oracle--file (file)
  "Print the hits of every match string in FILE."
  (with-temp-buffer
    (let ((coding-system-for-read 'utf-8))
      (insert-file-contents file))
    (setq buffer-file-name (expand-file-name file))
    (let ((org-inhibit-startup t))
      (delay-mode-hooks (org-mode)))
    (dolist (match match-oracle-strings)
      (let ((record
             (condition-case err
                 (let ((hits (org-map-entries
                              (lambda () (cons (line-number-at-pos)
                                               (substring-no-properties (org-get-heading t t t t))))
                              match)))
                   (and hits
                        `((match . ,match) (file . ,file) (lines . ,(vconcat (mapcar #'car hits)))
                          ,@(and (getenv "MATCH_ORACLE_TITLES")
                                 `((titles . ,(vconcat (mapcar #'cdr hits))))))))
               (error (list (cons 'match match) (cons 'file file) (cons 'error (format "%S" err)))))))
        (when record
          (princ (concat (json-encode record) "\n")))))
    (set-buffer-modified-p nil)
    (setq buffer-file-name nil)))

(let ((files command-line-args-left))
  (setq command-line-args-left nil)
  (princ (concat (json-encode (list (cons 'matches (vconcat match-oracle-strings)))) "\n"))
  (dolist (file files)
    (match-oracle--file file)))
